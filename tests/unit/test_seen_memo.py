"""The seen memo: what a process knows its crawls' seen sets hold (crawlq/stores/seen_memo.py);
the stores' side is in tests/stores/test_seen.py."""

from __future__ import annotations

from crawlq.jobs import JobSpec, Lease
from crawlq.stores.base import Completion
from crawlq.stores.seen_memo import SeenMemo


def child(crawl: int | None, n: int | None) -> JobSpec:
    fp = None if n is None else n.to_bytes(16, "big")
    return JobSpec(queue="q", task="t", crawl=crawl, fingerprint=fp)


def done(*children: JobSpec) -> Completion:
    return Completion(lease=Lease(1, "token"), children=children)


def test_it_learns_the_fingerprints_of_applied_completions_by_crawl() -> None:
    memo = SeenMemo()
    memo.learn(
        [done(child(1, 1), child(1, None), child(None, 2)), done(child(1, 3))], [True, False]
    )
    assert memo.knows(1, (1).to_bytes(16, "big"))
    assert not memo.knows(2, (1).to_bytes(16, "big"))  # another crawl's set
    assert not memo.knows(1, (3).to_bytes(16, "big"))  # its completion was not applied
    assert not memo.knows(1, (2).to_bytes(16, "big"))  # no crawl: no seen set


def test_past_its_limit_it_forgets_everything_and_starts_again() -> None:
    memo = SeenMemo(limit=3)
    memo.learn_specs([child(1, 1), child(1, 2), child(2, 3), child(1, 1)])
    assert all(memo.knows(c, n.to_bytes(16, "big")) for c, n in ((1, 1), (1, 2), (2, 3)))
    memo.learn_specs([child(2, 4)])
    assert memo.knows(2, (4).to_bytes(16, "big"))
    assert not any(memo.knows(c, n.to_bytes(16, "big")) for c, n in ((1, 1), (1, 2), (2, 3)))


def test_a_deleted_crawl_is_forgotten_and_its_room_given_back() -> None:
    memo = SeenMemo(limit=2)
    memo.learn_specs([child(1, 1), child(2, 2)])
    memo.forget(1)
    memo.learn_specs([child(3, 3)])  # fits: crawl 1's fingerprint no longer counts
    assert memo.knows(2, (2).to_bytes(16, "big")) and memo.knows(3, (3).to_bytes(16, "big"))
    assert not memo.knows(1, (1).to_bytes(16, "big"))


def test_unknown_children_leaves_out_only_the_known_ones() -> None:
    memo = SeenMemo()
    assert memo.unknown_children([done(child(1, 1))])[0].children == (child(1, 1),)
    memo.learn_specs([child(1, 1)])
    first = done(child(1, 1), child(1, 2), child(None, None), child(2, 1))
    second = done(child(1, 3))
    left = memo.unknown_children([first, second])
    assert [list(c.children) for c in left] == [
        [child(1, 2), child(None, None), child(2, 1)],
        [child(1, 3)],
    ]
    assert left[1] is second and left[0].lease == first.lease
