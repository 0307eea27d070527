"""Whatever a snapshot's ``host`` facts say, its scope's last-baseline pointer is one file
directly in the state dir (a hostile netns name or tree path cannot place it elsewhere)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.tune.snapshot import HOST_SCOPE, Store, scope_of

TEXT = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.sampled_from(["../../etc/passwd", "/", "a/b", "..", ".x", "\n", "dkl-src"]),
)


@settings(max_examples=300, deadline=None)
@given(netns=TEXT, root=TEXT)
def test_every_scope_points_to_one_file_in_the_state_dir(
    netns: str | None, root: str | None
) -> None:
    state = Path("/nonexistent-dkfc/state")
    scope = scope_of({"netns": netns, "root": root})
    pointer = Store(state)._pointer(scope)
    assert pointer.parent == state
    assert pointer.name.startswith("last-baseline")
    assert "/" not in pointer.name and pointer.name not in (".", "..")
    assert (pointer.name == "last-baseline") == (scope == HOST_SCOPE)


def test_a_hostile_namespace_name_in_a_snapshot_is_hashed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.set_last_baseline("x", scope_of({"netns": "../../evil", "root": "/"}))
    assert [p.name for p in tmp_path.iterdir()] == [
        next(p.name for p in tmp_path.iterdir() if p.name.startswith("last-baseline.netns-"))
    ]
    assert not (tmp_path.parent / "evil").exists()
    assert store.last_baseline("host") is None
