"""The inspector's stylesheet, vendored as a string (no CDN, no package data to ship)."""

from __future__ import annotations

CSS = """
:root { --fg: #1d232a; --muted: #5b6570; --line: #d8dde3; --bg: #f6f7f9; --accent: #2457a6;
        --bad: #a3222b; --ok: #1f6f3f; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.5rem;
         background: #17202b; color: #fff; }
header a { color: #fff; text-decoration: none; }
header .brand { font-weight: 700; letter-spacing: .02em; }
nav { display: flex; align-items: center; gap: 1rem; flex: 1; }
nav .who { margin-left: auto; color: #c9d2dc; font-size: .9em; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.5rem; margin: .6rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.6rem 0 .6rem; }
a { color: var(--accent); }
table { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; vertical-align: top; padding: .4rem .6rem;
         border-bottom: 1px solid var(--line); }
th { background: #eef1f5; font-weight: 600; font-size: .9em; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .9em; }
pre { background: #fff; border: 1px solid var(--line); padding: .8rem; white-space: pre-wrap; }
form { margin: 0; }
form.inline { display: inline; }
form.bar, .actions { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end;
                     margin: .6rem 0 1rem; }
form.bar label { display: flex; flex-direction: column; font-size: .85em; color: var(--muted); }
form.signin { display: flex; flex-direction: column; gap: .5rem; max-width: 24rem;
              background: #fff; padding: 1rem; border: 1px solid var(--line); }
input, select, button { font: inherit; padding: .3rem .5rem; }
button { background: var(--accent); color: #fff; border: 0; border-radius: 3px; cursor: pointer; }
button.danger { background: var(--bad); }
header button { background: transparent; border: 1px solid #8898aa; }
.error { color: var(--bad); font-weight: 600; }
.notice { color: var(--ok); font-weight: 600; }
.hint, .empty, .muted { color: var(--muted); }
.pill { display: inline-block; padding: 0 .4rem; border-radius: 3px; background: #e5eaf1;
        font-size: .85em; margin-right: .2rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem;
          background: #fff; border: 1px solid var(--line); padding: .8rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.text { background: #fff; border-left: 4px solid var(--accent); padding: .6rem .8rem;
        white-space: pre-wrap; }
.pages { display: flex; gap: 1rem; margin: .8rem 0; }
h3 { font-size: 1rem; margin: 1rem 0 .4rem; }
.diff del { background: #fbe0e2; color: var(--bad); }
.diff ins { background: #dcf2e3; color: var(--ok); }
figure.chart { margin: .6rem 0 1.2rem; background: #fff; border: 1px solid var(--line);
               padding: .6rem .8rem; }
figure.chart figcaption { font-weight: 600; margin-bottom: .3rem; }
svg.chart { display: block; width: 100%; max-width: 720px; height: auto; }
svg.chart .axis { stroke: var(--muted); stroke-width: 1; }
svg.chart .tick { fill: var(--muted); font-size: 11px; }
svg.chart .tick.y { text-anchor: end; }
svg.chart .tick.x { text-anchor: middle; }
.s0 { fill: #2457a6; background: #2457a6; }
.s1 { fill: #d9822b; background: #d9822b; }
.s2 { fill: #1f6f3f; background: #1f6f3f; }
.s3 { fill: #8e44ad; background: #8e44ad; }
.legend { font-size: .85em; color: var(--muted); margin: .3rem 0; }
.legend > span { margin-right: 1rem; }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em;
          vertical-align: -.05em; }
figure.chart summary { cursor: pointer; color: var(--accent); font-size: .9em; }
"""
