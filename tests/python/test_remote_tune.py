# fusor.tune on a real fusord on loopback (fusor.Client): tokens, caching on the server, and the
# CLI's errors for a wrong token and an unreachable server.
import os
import re
import signal
import subprocess
import time

import pytest

import fusor

TOKEN = "pytest-tune-token-0123456789"


@pytest.fixture(scope="module")
def fusord(tmp_path_factory):
    """A fusord on 127.0.0.1 with a free port, a fresh SQLite database and one read,tune token;
    yields (address, client token file). Small budgets keep a tune to about a second."""
    d = tmp_path_factory.mktemp("fusord")
    tokens = d / "tokens"
    tokens.write_text(f"{TOKEN} read,tune pytest\n")
    tokens.chmod(0o600)
    client_token = d / "client-token"
    client_token.write_text(TOKEN + "\n")
    log_path = d / "fusord.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [os.environ["FUSORD"], "--listen", "127.0.0.1:0", "--db", str(d / "server.db"),
             "--token-file", str(tokens), "--default-measure-budget", "1", "--measure-threads",
             "1", "--default-time-limit", "20", "--shutdown-grace", "2"],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    try:
        address = None
        for _ in range(300):
            m = re.search(r"listening on (127\.0\.0\.1:[0-9]+)", log_path.read_text())
            if m:
                address = m.group(1)
                break
            if process.poll() is not None:
                break
            time.sleep(0.1)
        if address is None:
            pytest.fail("fusord did not start listening:\n" + log_path.read_text())
        yield address, client_token
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_remote_tune_stores_the_plan_on_the_server_and_hits_its_cache(fusord, squeezenet):
    address, token_file = fusord
    client = fusor.Client(address, token_file=token_file)
    first = fusor.tune(squeezenet, client=client, algorithm="greedy")
    assert not first.cache_hit and first.plan.groups
    assert first.graph_hash == fusor.inspect(squeezenet)["canonical_hash"]
    again = fusor.tune(squeezenet, client=client, algorithm="greedy")
    assert again.cache_hit and again.plan == first.plan


def test_a_wrong_token_is_an_auth_error_with_the_cli_exit_code(fusord, squeezenet, tmp_path):
    address, _ = fusord
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-a-token-0123456789\n")
    with pytest.raises(fusor.AuthError) as e:
        fusor.tune(squeezenet, client=fusor.Client(address, token_file=wrong))
    assert e.value.exit_code == 5 and isinstance(e.value, PermissionError)


def test_an_unreachable_server_is_an_unavailable_error(squeezenet):
    with pytest.raises(fusor.UnavailableError) as e:
        fusor.tune(squeezenet, client=fusor.Client("127.0.0.1:1", timeout_s=5))
    assert e.value.exit_code == 3


def test_db_and_client_together_are_refused(squeezenet, tmp_path):
    with pytest.raises(fusor.InvalidArgumentError, match="db is for local tuning"):
        fusor.tune(squeezenet, db=tmp_path / "t.db", client=fusor.Client("127.0.0.1:1"))
