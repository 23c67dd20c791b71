"""A newcomer's small cube (issue 26): user alice, fifteen turns over three sessions, a document
about levada hikes in Madeira (with chunks) and three short notes about them.

Alice's turns are spoken by "Alice"; the assistant's by no one named.  The tiers run (inline),
so the cube also holds segments, facts and a profile, as a real cube would.
"""

from __future__ import annotations

from memstrata import MemoryOS

SESSIONS = {
    "s1": [
        ("user", "Hi! How are you today?"),
        ("assistant", "Hello Alice, I'm well, thanks. What's new?"),
        ("user", "I moved to Lisbon in 2023"),
        ("assistant", "Lisbon is lovely. Do you like it there?"),
        ("user", "Yes, the light is beautiful and the food is great."),
    ],
    "s2": [
        ("user", "Good morning!"),
        ("assistant", "Good morning! How was your weekend?"),
        ("user", "I adopted a beagle named Biscuit in March."),
        ("assistant", "A beagle! How is Biscuit settling in?"),
        ("user", "He chews everything but we love him."),
    ],
    "s3": [
        ("user", "Thanks for asking, I'm doing well."),
        ("assistant", "Glad to hear. Any plans for the summer?"),
        ("user", "We might visit Madeira in June."),
        ("assistant", "Madeira is beautiful in early summer."),
        ("user", "I work as a nurse at a hospital near the river."),
    ],
}
DOCUMENT = (
    b"# Levada walks in Madeira\n\n"
    b"The Levada do Caldeirao Verde hike follows an old irrigation channel through laurel forest "
    b"in Madeira. The levada trail is about 13 km return and passes through several tunnels, so "
    b"bring a torch. Start early: the parking area at Queimadas fills up by nine, and the levada "
    b"path is narrow in places. The hike ends at a waterfall falling into a green pool, which "
    b"gives the levada its name. It is the classic levada hike of the island.\n\n"
    b"## Pico do Arieiro\n\n"
    b"The ridge walk from Pico do Arieiro to Pico Ruivo climbs stone stairs above the clouds. "
    b"It is a mountain hike, not a levada walk: steep, exposed, with tunnels cut through the "
    b"rock. Sunrise draws crowds to the summit car park; in the afternoon the path is quieter. "
    b"Take water, a warm layer and a head torch, and check the park's page for closures after "
    b"rockfalls, which happen every winter on this trail in Madeira.\n\n"
    b"## Ponta de Sao Lourenco\n\n"
    b"At the island's eastern tip the Sao Lourenco trail crosses bare, windswept headlands "
    b"with red and black cliffs. There is no shade and no water on the way, and the wind can be "
    b"strong enough to stop you near the edges. The walk is about 8 km return and ends at a "
    b"small house with a cafe in summer. Seals are sometimes seen in the coves below.\n"
)
NOTES = (
    b"Packing list for a levada hike in Madeira: rain jacket, torch, water, snacks, and shoes "
    b"with grip for the wet stones along the channel.",
    b"Levada hikes in Madeira are graded by the tourist office: most are easy and flat, since "
    b"the channels follow the contour of the hills.",
    b"Levada hike, Madeira: the Levada do Rei hike is the easiest levada hike in Madeira.",
)
LISBON = "I moved to Lisbon in 2023"
LEVADA_NOTE = NOTES[2].decode()


def build(mos: MemoryOS) -> None:
    """Alice's cube ``notes`` in ``mos``: the sessions, one day apart in 2024, then the
    document and the notes; every background task done."""
    mos.create_user("alice", name="Alice")
    mos.create_cube("notes", owner="alice", cube_id="notes")
    for month, (session, turns) in enumerate(SESSIONS.items(), start=1):
        messages = [
            {"role": role, "content": text, "timestamp": f"2024-0{month}-10T10:{n:02d}:00Z"}
            | ({"name": "Alice"} if role == "user" else {})
            for n, (role, text) in enumerate(turns)
        ]
        mos.add(messages, user_id="alice", cube_id="notes", session_id=session)
    mos.add_document(DOCUMENT, filename="levada.md", user_id="alice", cube_id="notes")
    for n, note in enumerate(NOTES):
        mos.add_document(note, filename=f"note{n}.txt", user_id="alice", cube_id="notes")
    mos.wait()
