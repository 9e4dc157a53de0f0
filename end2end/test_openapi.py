"""The OpenAPI document against the real API: Schemathesis generates requests from
`/api/openapi.json` (its examples, coverage, fuzzing and stateful phases, with every check: no
5xx, documented status codes, content types, headers and bodies, valid data accepted, invalid
data rejected, auth enforced, unsupported methods refused, deleted objects gone, ...) and runs
them against the running binary, once with a customer's API key and once with the admin token.

Schemathesis runs as a subprocess from this virtualenv (installed from requirements.txt; nothing
is downloaded here), with a fixed seed and a bounded number of examples per operation, so a run
takes a minute or two on a debug build. Each run writes a JUnit report to end2end/artifacts/.

Nothing is excluded: every operation and every check runs. What JSON Schema cannot say is handled
by the hooks below (they only turn requests the document calls valid into ones the server can
accept, and never make a request the document calls invalid look valid, or the reverse):
  - the opaque `cursor` of the lists: only `next_cursor` values are cursors;
  - an `Idempotency-Key` is the caller's for every request it sends: a valid key is made unique to
    each call, so that two calls that drew the same key are not one request repeated with another body;
  - `min_delay_secs <= max_delay_secs` of an exponential retry policy (a rule across two fields);
  - a time window's `since` before its `until`, and a replayed window of at most 366 days;
  - dashboard usernames are unique, and a customer user's `customer_id` must exist;
  - a subscription's `filter` must be a CEL expression that gives a boolean (any such text is
    swapped for one), and its extra `headers` are unique regardless of case (a name that repeats
    another's but for case is dropped);
  - an event type's `schema` must be valid JSON Schema that its `example` keeps, and its `name`
    must not start with `herald.` (a schema is swapped for `{}`, which every example keeps and
    which refuses no later publish; a reserved name gets another first letter).
The server is the session's shared one, so the customer's run uses a tenant of this module's own,
and the admin's run pins every valid `customer_id` (query parameter and body field, or sets it
where it is absent) to that tenant: the admin's bulk replay, lists, publishing, new subscriptions
and the ids the stateful phase takes from those lists stay within it. What the admin's run still does server-wide only adds
rows: customers, dashboard users (with unique names) and API keys (also for customers it finds
in `GET /api/v1/customers`); it never changes or deletes another module's objects, because their
ids never appear in its inputs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import ARTIFACTS_DIR, HeraldServer, utc_stamp

VENV_BIN = Path(sys.executable).parent
# Examples per operation in the fuzzing and stateful phases; the seed makes runs repeatable.
MAX_EXAMPLES = int(os.environ.get("HERALD_E2E_SCHEMATHESIS_EXAMPLES", "40"))
SEED = int(os.environ.get("HERALD_E2E_SCHEMATHESIS_SEED", "20261122"))
RUN_TIMEOUT = 600

HOOKS = textwrap.dedent(
    '''
    """Schemathesis hooks for Herald (written by end2end/test_openapi.py)."""
    import base64
    import binascii
    import itertools
    import os
    import re
    from datetime import datetime, timedelta

    import schemathesis

    CUSTOMER_ID = os.environ.get("HERALD_E2E_CUSTOMER_ID") or None
    PINNED = os.environ.get("HERALD_E2E_PIN_CUSTOMER") == "1"
    CURSOR_SHAPE = re.compile(r"YzE6[A-Za-z0-9_-]+")
    IDEMPOTENCY_KEY = re.compile(r"[!-~]{1,255}")
    TEXT = re.compile(r"[^\\x00]*[^\\s\\x00][^\\x00]*")
    _serial = itertools.count()
    # Usernames get a suffix unique to this run: the server may keep users of earlier runs.
    _run = os.urandom(3).hex()


    def _is_cursor(value):
        # The server decodes strictly: no padding, no stray bits in the last character.
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except (binascii.Error, ValueError):
            return False
        if base64.urlsafe_b64encode(raw).decode().rstrip("=") != value:
            return False
        return re.fullmatch(rb"c1:[A-Za-z0-9_]{1,64}", raw) is not None


    def _text(value, max_len):
        return isinstance(value, str) and len(value) <= max_len and TEXT.fullmatch(value) is not None


    def _time(value):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
        except ValueError:
            return None


    def _window(fields, longest):
        # `since` must come before `until`, and a replay's window spans at most 366 days.
        since, until = _time(fields.get("since")), _time(fields.get("until"))
        if since is None or until is None:
            return
        if since.tzinfo is None or until.tzinfo is None:
            return
        if since >= until or (longest is not None and until - since > longest):
            fields["since"] = (until - timedelta(hours=1)).isoformat()


    def _int(value):
        # A whole number, however it is written (42 or 42.0): the API takes both.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return isinstance(value, int) or value.is_integer()


    @schemathesis.hook
    def before_call(context, case, **kwargs):
        # A valid Idempotency-Key is made unique to each call, so that two calls that happened to
        # draw the same key are not one request repeated with another body (422). Every phase
        # passes here, just before its call.
        # A case that leaves a parameter out (the coverage phase's missing Authorization, say) is
        # sent as drawn: editing it would make Schemathesis read it again with its auth applied.
        data = getattr(getattr(getattr(case, "meta", None), "phase", None), "data", None)
        if "missing" in str(getattr(data, "scenario", "")).lower():
            return
        headers = case.headers if case.headers is not None else {}
        for name in [n for n in headers if n.lower() == "idempotency-key"]:
            key = headers[name]
            if isinstance(key, str) and IDEMPOTENCY_KEY.fullmatch(key):
                headers[name] = f"{key[:200]}~{_run}{next(_serial)}"
        # Dashboard usernames are unique: each call's is made so (a case may be sent twice).
        body = case.body
        if case.operation.method.upper() == "POST" and case.operation.path == "/api/v1/users" and isinstance(body, dict):
            username = body.get("username")
            if _text(username, 100):
                body["username"] = f"{username.split('~' + _run)[0][:86]}~{_run}{next(_serial)}"


    @schemathesis.hook
    def map_case(context, case):
        operation = f"{case.operation.method.upper()} {case.operation.path}"
        query = case.query if isinstance(case.query, dict) else {}
        # The document can only say what a cursor looks like; a string of that shape that is not
        # one is swapped for a real one (of an id no row has, so it just ends the list).
        cursor = query.get("cursor")
        if isinstance(cursor, str) and CURSOR_SHAPE.fullmatch(cursor) and not _is_cursor(cursor):
            query["cursor"] = base64.urlsafe_b64encode(b"c1:zz").decode().rstrip("=")
        if operation == "GET /api/v1/events":
            _window(query, None)
        body = case.body
        if not isinstance(body, dict):
            return case
        if operation == "POST /api/v1/events/replay":
            _window(body, timedelta(days=366))
        policy = body.get("retry_policy")
        if isinstance(policy, dict) and policy.get("kind") == "exponential":
            low, high = policy.get("min_delay_secs"), policy.get("max_delay_secs")
            if _int(low) and _int(high) and low > high:
                policy["min_delay_secs"], policy["max_delay_secs"] = high, low
        if operation == "POST /api/v1/users":
            if PINNED and body.get("role") == "customer" and _text(body.get("customer_id"), 64):
                body["customer_id"] = CUSTOMER_ID
        if _text(body.get("filter"), 4096):
            body["filter"] = "has(message.subject)"
        headers = body.get("headers")
        if isinstance(headers, dict):
            seen = set()
            for name in list(headers):
                if name.lower() in seen:
                    del headers[name]
                seen.add(name.lower())
        if operation in ("POST /api/v1/event-types", "PATCH /api/v1/event-types/{name}"):
            if isinstance(body.get("schema"), (dict, bool)):
                body["schema"] = {}
            name = body.get("name")
            if isinstance(name, str) and name.startswith("herald."):
                body["name"] = "x" + name[1:]
        if PINNED and operation in ("POST /api/v1/subscriptions", "POST /api/v1/messages/replay", "POST /api/v1/event-types"):
            customer = body.get("customer_id")
            if customer is None or _text(customer, 64):
                body["customer_id"] = CUSTOMER_ID
        return case
    '''
)


def schemathesis_command() -> list[str]:
    exe = VENV_BIN / "schemathesis"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    return [found] if found else [sys.executable, "-m", "schemathesis.cli"]


def failure_summary(output: str, junit: Path) -> str:
    """The failures of a run: schemathesis's own summary and every failing operation's detail."""
    parts = []
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            for failure in list(case.iter("failure")) + list(case.iter("error")):
                text = failure.text or failure.get("message") or ""
                parts.append(f"--- {case.get('name')}\n{text[:3000]}")
    summary = output[output.find("=== SUMMARY") :] if "=== SUMMARY" in output else output[-6000:]
    return "\n".join(parts[:40]) + "\n\n" + summary


@pytest.fixture(scope="module")
def openapi_tenant(herald: HeraldServer):
    return herald.new_tenant("openapi")


@pytest.mark.parametrize("who", ["customer", "admin"])
def test_the_api_matches_its_openapi_document(herald: HeraldServer, openapi_tenant, who: str, tmp_path: Path):
    token = openapi_tenant.api_key["token"] if who == "customer" else herald.admin_token
    (tmp_path / "herald_hooks.py").write_text(HOOKS)
    # No cache: a run must not replay failures a previous run stored in its working directory.
    config = "[cache]\nenabled = false\n"
    if who == "admin":
        config += f'[parameters]\n"query.customer_id" = "{openapi_tenant.id}"\n'
    (tmp_path / "schemathesis.toml").write_text(config)

    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    junit = ARTIFACTS_DIR / f"schemathesis-{who}-{stamp}.xml"
    log = ARTIFACTS_DIR / f"schemathesis-{who}-{stamp}.log"
    command = [
        *schemathesis_command(),
        "--config-file",
        str(tmp_path / "schemathesis.toml"),
        "run",
        f"{herald.base_url}/api/openapi.json",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--continue-on-failure",
        "--request-timeout",
        "30",
        "--header",
        f"Authorization: Bearer {token}",
        "--report",
        "junit",
        "--report-junit-path",
        str(junit),
        "--no-color",
    ]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(
        {
            "SCHEMATHESIS_HOOKS": "herald_hooks",
            "PYTHONPATH": str(tmp_path),
            "HERALD_E2E_CUSTOMER_ID": openapi_tenant.id,
            "HERALD_E2E_PIN_CUSTOMER": "1" if who == "admin" else "0",
            "NO_COLOR": "1",
        }
    )
    result = subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    output = re.sub(r"Bearer \S+", "Bearer [token]", result.stdout + result.stderr)
    log.write_text(output)
    code = result.returncode
    assert code == 0, (
        f"schemathesis ({who}) exited with {code}; full output in {log}, report in {junit}\n"
        + failure_summary(output, junit)
        + "\n\nHerald's warnings and errors meanwhile:\n"
        + herald.log_warnings()
    )
