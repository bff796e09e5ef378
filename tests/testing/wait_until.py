"""wait_until: the one way the Python tests wait for something another
process does (the equivalent of tests/testing/wait_until.h). It polls an
observable condition until it holds or a deadline passes; it never sleeps
"to give time". A wait that times out says what it waited for.

Import it with the tests/testing folder on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testing"))
    from wait_until import wait_until
"""

import time


class WaitTimeout(AssertionError):
    """A wait whose condition did not hold by its deadline."""


def wait_until(what, cond, timeout, interval=0.2, error=WaitTimeout,
               describe=None):
    """Calls cond() until it returns a truthy value, and returns that value.

    After `timeout` seconds raises `error` ("timed out after T s waiting for
    <what>", plus describe() when given: the last state seen). With
    error=None returns None instead (a bounded wait whose end is not a
    failure). Checks first at once, then every `interval` seconds (the
    first few sooner).
    """
    deadline = time.monotonic() + timeout
    pause = min(0.01, interval)
    while True:
        value = cond()
        if value:
            return value
        now = time.monotonic()
        if now >= deadline:
            value = cond()
            if value:
                return value
            if error is None:
                return None
            message = f"timed out after {timeout:g} s waiting for {what}"
            if describe is not None:
                message += f": {describe()}"
            raise error(message)
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, interval)
