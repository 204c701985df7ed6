"""The host's single-thread speed read where a host-bound figure is made (tcore.worker.hostspeed): its fastest reading
is the host at rest, the timed rounds wait a bounded time for it, and a run timed on a slower host says so."""
from tcore.worker import hostspeed


def _host(readings, clock_step=0.5):
    readings, now = iter(readings), [0.0]

    def sleep(s):
        now[0] += s

    return hostspeed.HostSpeed(read=lambda: next(readings), sleep=sleep, clock=lambda: now[0])


def test_the_rounds_wait_for_the_host_to_read_at_rest_again():
    host = _host([10.0, 14.0, 13.5, 10.2, 10.1, 10.2])
    host.note()  # a phase boundary at rest
    assert host.wait_for_rest() is True
    assert host.waited_s == 1.0  # two slow readings, half a second apart, then one at rest
    for _ in range(2):
        host.round_done()
    assert host.details()["slow_pct"] == 1.5 and hostspeed.words(host.details()) is None


def test_a_host_slow_throughout_is_waited_for_a_bounded_time_and_the_run_says_so():
    host = _host([10.0] + [13.0] * 100)
    host.note()
    assert host.wait_for_rest(most_s=3.0) is False and host.waited_s == 3.0
    for _ in range(4):
        host.round_done()
    details = host.details()
    assert details == {"reference_at_rest_ms": 10.0, "reference_rounds_ms": 13.0, "slow_pct": 30.0, "waited_s": 3.0}
    said = hostspeed.words(details)
    assert "30% slower than at rest" in said and "not the solo figure" in said and "waited 3 s" in said


def test_no_rounds_no_reading():
    host = _host([10.0])
    host.note()
    assert host.details() == {} and hostspeed.words({}) is None


def test_the_reference_loop_times_something():
    assert 0 < hostspeed.reference_ms(loops=1) < 60_000


def test_a_slow_core_is_left_for_one_that_reads_at_rest():
    """A virtual core reads slow while the physical core under it runs another thread; another may not."""
    on = {"core": 3}
    speed = {3: 14.0, 5: 10.1, 7: 12.0}
    host = hostspeed.HostSpeed(read=lambda: speed[on["core"]], sleep=lambda s: None, clock=lambda: 0.0)
    host.seen.append(10.0)  # at rest, earlier in the run

    def move(core):
        if core == 9:
            raise OSError("not one of this process's cores")
        on["core"] = core

    assert host.wait_for_rest(cores=[3, 5, 7, 9], move=move) is True
    assert on["core"] == 5 and host.core == 5 and host.moves == 1
    host.round_done()
    assert host.details()["moved_to_core"] == 5 and host.details()["slow_pct"] == 1.0


def test_a_host_more_than_twice_as_slow_is_said_as_a_factor_not_a_percentage_past_100():
    details = {"reference_at_rest_ms": 10.0, "reference_rounds_ms": 22.0, "slow_pct": 120.0, "waited_s": 0.0}
    said = hostspeed.words(details)
    assert said.startswith("The host's single-thread work took 2.2x as long as at rest while the rounds were timed:")
    assert "% slower" not in said
