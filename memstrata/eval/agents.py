"""Tool and skill memory measured on synthetic agent traces (issue 30; docs/evaluation.md).

* ``tool_suite``: ``TRACES`` tasks over seven tools, one call each in the OpenAI format (every
  fourth fails with an error), added through ``MemoryOS.add``; then one question per task about
  its call, in other words ("how did I call the weather API for Paris", "why did the e-mail to
  Bob fail"), searched with ``include=["tool"]``.  Score: the task's own call in the top 3.
* ``skill_suite``: 20 task families, each a goal solved by its own sequence of tools; each is
  solved twice with other entities and phrasing (``end_task`` success after each), then asked a
  third time in new words with ``include=["skill"]``.  Score: the family's skill first.  Then
  the first ``DEMOTED`` families fail twice (``end_task`` failure): each of those skills must be
  out of the ranking (archived), the others still first.

Everything is deterministic (no sampling), runs on the configured embedder, and needs no model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memstrata.memory.system import MemoryOS

#: Tasks of the tool suite.
TRACES = 35
#: Families of the skill suite that fail later.
DEMOTED = 5
_CITIES = ["Paris", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quebec"]
_PEOPLE = ["Bob", "Maria", "Chen", "Olu", "Priya"]
#: tool → (request, arguments, result, question about the call), formatted with one entity.
_TOOLS: dict[str, tuple[str, dict[str, str], str, str]] = {
    "get_weather": ("What's the weather in {x} today?", {"city": "{x}"},
                    '{{"temp": 21, "sky": "clear over {x}"}}',
                    "how did I call the weather API for {x}"),
    "send_email": ("Email {x} that the meeting moved to Friday", {"to": "{x}@example.com",
                   "subject": "meeting moved"}, '{{"sent": true}}',
                   "what did the message to {x} say"),
    "convert_currency": ("How much is 250 euros in the currency of {x}?", {"amount": "250",
                         "from": "EUR", "to_country": "{x}"}, '{{"amount": 270.5}}',
                         "the exchange rate lookup for money in {x}"),
    "book_hotel": ("Find me a hotel in {x} for two nights", {"city": "{x}", "nights": "2"},
                   '{{"hotel": "Grand {x}", "booked": true}}', "which hotel did I reserve in {x}"),
    "query_db": ("Show the sales rows for the {x} region", {"table": "sales", "region": "{x}"},
                 '{{"rows": 42}}', "the database query about {x} sales figures"),
    "translate": ("Translate 'good morning' for my trip to {x}", {"text": "good morning",
                  "target": "language of {x}"}, '{{"text": "bonjour"}}',
                  "what phrase did I translate for {x}"),
    "create_event": ("Put a call with {x} in my calendar at 3pm", {"title": "call with {x}",
                     "time": "15:00"}, '{{"event": "ok"}}',
                     "the calendar entry I made for {x}"),
}  # fmt: skip
_ERROR = "Error: upstream service timed out for {x}"


@dataclass(frozen=True)
class Score:
    """A suite's result: questions asked, answered right, and the share."""

    asked: int
    right: int

    @property
    def share(self) -> float:
        return self.right / self.asked if self.asked else 0.0


def _call(call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": tool, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": function}
    ]}  # fmt: skip


def _fill(value: Any, x: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, x) for k, v in value.items()}
    return str(value).format(x=x)


def tool_suite(mos: MemoryOS, user_id: str, cube_id: str, traces: int = TRACES) -> Score:
    """Add ``traces`` tasks and ask one question per task (see the module docs)."""
    names = list(_TOOLS)
    questions: list[tuple[str, str]] = []
    for n in range(traces):
        tool = names[n % len(names)]
        x = (_CITIES if n % 2 == 0 else _PEOPLE)[n // len(names) % 5] if tool in (
            "send_email", "create_event") else _CITIES[n // len(names) % len(_CITIES)]  # fmt: skip
        request, arguments, result, question = _TOOLS[tool]
        failed = n % 4 == 3
        call_id = f"call-{n}"
        messages = [
            {"role": "user", "content": request.format(x=x)},
            _call(call_id, tool, _fill(arguments, x)),
            {"role": "tool", "tool_call_id": call_id,
             "content": _ERROR.format(x=x) if failed else result.format(x=x)},
        ]  # fmt: skip
        mos.add(messages, user_id=user_id, cube_id=cube_id, session_id=f"trace-{n}")
        asked = f"why did the call for {x} fail" if failed else question.format(x=x)
        questions.append((asked, call_id))
    right = 0
    for asked, call_id in questions:
        hits = mos.search(asked, user_id=user_id, cube_ids=[cube_id], top_k=3, include=["tool"])
        right += any(h.item.metadata.get("call_id") == call_id for h in hits)
    return Score(len(questions), right)


#: Skill families: three phrasings of the goal ({x}: an entity), then the tools in order.
FAMILIES: list[tuple[tuple[str, str, str], tuple[str, ...]]] = [
    (("Book a flight to {x}", "Get me plane tickets to {x}", "I need to fly to {x}"),
     ("search_flights", "book_flight")),
    (("Reserve a hotel room in {x}", "Find accommodation in {x} and book it",
      "Where can I stay overnight in {x}? Book it"), ("search_hotels", "book_hotel")),
    (("Send the monthly report to {x}", "Email {x} this month's report",
      "Deliver the month-end report to {x} by mail"), ("build_report", "send_email")),
    (("Schedule a meeting with {x}", "Set up a call with {x} next week",
      "Arrange a meeting slot with {x}"), ("check_calendar", "create_event")),
    (("Translate the contract into the language of {x}", "Make a translated copy of the "
      "contract for {x}", "Localise the agreement for {x}"), ("read_file", "translate")),
    (("Fix the failing unit tests in the {x} repository", "Repair broken tests in {x}",
      "Get the {x} test suite green again"), ("run_tests", "edit_file", "run_tests")),
    (("Deploy the {x} service to production", "Release {x} to prod",
      "Ship the latest {x} build live"), ("build_image", "push_image", "deploy")),
    (("Order groceries for delivery to {x}", "Buy food online and have it sent to {x}",
      "Get a supermarket delivery to {x}"), ("search_products", "add_to_cart", "checkout")),
    (("Pay the electricity bill for {x}", "Settle the power invoice of {x}",
      "Make the payment for {x}'s energy bill"), ("fetch_invoice", "pay_invoice")),
    (("Summarise the news about {x}", "Give me a digest of today's headlines on {x}",
      "What is the press saying about {x}? Summarise"), ("search_news", "summarise")),
    (("Back up the {x} database", "Make a snapshot of the {x} DB",
      "Create a database dump of {x} for safekeeping"), ("dump_database", "upload_file")),
    (("Convert the {x} prices to euros", "Turn the {x} price list into EUR",
      "Express the {x} costs in euro"), ("read_sheet", "convert_currency", "write_sheet")),
    (("Check the weather forecast for {x}", "Will it rain in {x} this weekend?",
      "Forecast for {x} please"), ("get_weather",)),
    (("Rent a car in {x}", "Hire a vehicle for my stay in {x}",
      "I need a rental car when I land in {x}"), ("search_cars", "book_car")),
    (("Create a support ticket for the {x} outage", "Open an incident about {x} being down",
      "Log a ticket: {x} is not working"), ("lookup_service", "create_ticket")),
    (("Resize the {x} photos for the website", "Shrink the {x} pictures for web use",
      "Make web-sized versions of the {x} images"), ("list_images", "resize_image")),
    (("Find a restaurant in {x} and reserve a table", "Book dinner somewhere in {x}",
      "Get us a table at a place to eat in {x}"), ("search_restaurants", "reserve_table")),
    (("Onboard {x} as a new employee", "Set up accounts for new hire {x}",
      "Give newcomer {x} access to our systems"), ("create_account", "grant_access",
                                                    "send_email")),
    (("Analyse the sales trend in {x}", "How are sales developing in {x}? Chart it",
      "Plot the revenue trend for {x}"), ("query_db", "plot_chart")),
    (("Renew the TLS certificate for {x}", "Refresh the HTTPS cert of {x}",
      "The SSL certificate of {x} expires: replace it"), ("request_cert", "install_cert")),
]  # fmt: skip
_ENTITIES = ("Rome", "Madrid", "Ada", "Vienna", "Nairobi")


def _solve(
    mos: MemoryOS, user_id: str, cube_id: str, session: str, ask: str, x: str,
    tools: tuple[str, ...], *, fail: bool = False,
) -> None:  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": ask}]
    for n, tool in enumerate(tools):
        call_id = f"{session}-{n}"
        messages.append(_call(call_id, tool, {"target": x, "step": n}))
        bad = fail and n == len(tools) - 1
        content = "Error: the service refused the request" if bad else '{"ok": true}'
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    mos.add(messages, user_id=user_id, cube_id=cube_id, session_id=session)


def skill_suite(mos: MemoryOS, user_id: str, cube_id: str) -> tuple[Score, Score, int]:
    """Learn, ask and demote (see the module docs): the first-hit score of the third asks, the
    score after the demotions (a demoted skill must be gone, the others first), and how many
    families' second run became version 2 of their skill."""
    keys = {}
    versioned = 0
    for f, (goals, tools) in enumerate(FAMILIES):
        for run in range(2):
            session = f"family-{f}-run-{run}"
            x = _ENTITIES[(f + run) % len(_ENTITIES)]
            _solve(mos, user_id, cube_id, session, goals[run].format(x=x), x, tools)
            made = mos.end_task(user_id=user_id, cube_id=cube_id, session_id=session)
            keys[f] = made[0].key
            versioned += run == 1 and made[0].version == 2
    first = _ask(mos, user_id, cube_id, keys, demoted=set())
    for f, (goals, tools) in enumerate(FAMILIES[:DEMOTED]):
        for run in range(2):
            session = f"family-{f}-fail-{run}"
            x = _ENTITIES[(f + 2) % len(_ENTITIES)]
            _solve(mos, user_id, cube_id, session, goals[run].format(x=x), x, tools, fail=True)
            mos.end_task(user_id=user_id, cube_id=cube_id, session_id=session, outcome="failure")
    after = _ask(mos, user_id, cube_id, keys, demoted=set(range(DEMOTED)))
    return first, after, versioned


def _ask(
    mos: MemoryOS, user_id: str, cube_id: str, keys: dict[int, str | None], demoted: set[int]
) -> Score:
    right = 0
    for f, (goals, _) in enumerate(FAMILIES):
        ask = goals[2].format(x=_ENTITIES[(f + 3) % len(_ENTITIES)])
        hits = mos.search(ask, user_id=user_id, cube_ids=[cube_id], top_k=3, include=["skill"])
        if f in demoted:
            right += all(h.item.key != keys[f] for h in hits)
        else:
            right += bool(hits) and hits[0].item.key == keys[f]
    return Score(len(FAMILIES), right)
