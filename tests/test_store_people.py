"""Whose runs are whose (tcore.store.participants): a participant who takes a name keeps their runs and sweeps."""
from tcore.lab import sweeps
from tcore.lab.queue import scheduler
from tests.helpers import QUICK


def test_a_renamed_owner_keeps_their_runs_and_sweeps_and_nobody_elses_move(store):
    proc = scheduler.this_process()
    theirs = [store.queue.enqueue(QUICK, device="cpu", owner="guest-0badc0", proc=proc, timeout_s=None)
              for _ in range(2)]
    other = store.queue.enqueue(QUICK, device="cpu", owner="bob~0c1d", proc=proc, timeout_s=None)
    sweep_id = store.sweeps.create_sweep(owner="guest-0badc0", label="s", size=0, skipped=[])

    assert store.people.rename_owner("guest-0badc0", "ada~0bad") == 2
    assert [store.get(i).owner for i in theirs] == ["ada~0bad", "ada~0bad"] and store.get(other).owner == "bob~0c1d"
    assert sweeps.latest(store, "ada~0bad").id == sweep_id and store.sweeps.latest_sweep("guest-0badc0") is None
    assert store.queue.queued_count("ada~0bad") == 2


def test_an_owner_is_found_by_the_tag_and_secret_its_name_keeps(store):
    proc = scheduler.this_process()
    store.queue.enqueue(QUICK, device="cpu", owner="guest-0bad.00000000c0ffee00", proc=proc, timeout_s=None)
    # the same secret
    store.queue.enqueue(QUICK, device="cpu", owner="bob~1a2b.00000000c0ffee00", proc=proc, timeout_s=None)
    assert store.people.owner_ending("0bad.00000000c0ffee00") == "guest-0bad.00000000c0ffee00"
    store.people.rename_owner("guest-0bad.00000000c0ffee00", "ada~0bad.00000000c0ffee00")
    store.sweeps.create_sweep(owner="ada-l~0bad.00000000c0ffee00", label="s", size=0, skipped=[])  # the newest
    assert store.people.owner_ending("0bad.00000000c0ffee00") == "ada-l~0bad.00000000c0ffee00"
    assert store.people.owner_ending("1a2b.00000000c0ffee00") == "bob~1a2b.00000000c0ffee00"
    assert store.people.owner_ending("0bad.00000000c0ffee01") is None


def test_a_typed_name_and_kept_settings_follow_the_owner_through_a_rename(store):
    guest, ada, ada_l = ("guest-0bad.00000000c0ffee00", "ada~0bad.00000000c0ffee00", "ada-l~0bad.00000000c0ffee00")
    store.people.keep_settings_of(guest, {"run_batch_size": 3})
    store.people.rename_owner(guest, ada, "Ada")
    assert store.people.typed_names() == {ada: "Ada"} and store.people.settings_of(ada) == {"run_batch_size": 3}
    assert store.people.settings_of(guest) is None
    store.people.rename_owner(ada, ada_l, "Ada L")
    assert store.people.typed_names() == {ada_l: "Ada L"} and store.people.settings_of(ada_l) == {"run_batch_size": 3}
    assert store.people.owner_ending("0bad.00000000c0ffee00") == ada_l  # named, with no run yet: found after a restart
