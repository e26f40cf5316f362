#!/usr/bin/env python3
"""Checks one Cloudflare API v4 JSON body against the official Python library's models.

Usage:
    cloudflare_check.py OPERATION < body.json
    cloudflare_check.py --list
    cloudflare_check.py --self-test

OPERATION names a response (`dnssec.get`) or, with the suffix `:request`, a request body
(`dnssec.edit:request`); `error` is the failure envelope any call may answer. Exit status
0 when the body conforms, 1 with one line per mismatch naming the field (a dotted path
from the top of the body), 2 on a usage error.

The models are the `cloudflare` package's own (pip install cloudflare; written against
5.9.0, see docs/providers/cloudflare.md). Strict means:
  - pydantic strict mode in JSON mode (`model_validate_json(..., strict=True)`,
    `TypeAdapter(...).validate_json(..., strict=True)`): no "13" for 13, no 1 for true;
    ISO 8601 strings for datetimes;
  - no field the model does not name. The library's models are `extra="allow"` (so that
    the client survives new fields); a field they do not name lands in `model_extra`,
    which is walked after validation. Request bodies are TypedDicts, walked by their
    type hints;
  - a few rules beyond the model, marked so: DNS integers the schema types as `number`
    (`flags`, `key_tag`, a DNSKEY record's `data.*`, `ttl`) must be whole.

The envelope (`success`, `errors`, `messages`, `result`, `result_info`) has no single
model in the library (it strips it in `ResultWrapper` and the page classes of
`cloudflare.pagination`), so it is checked here: `errors[]`/`messages[]` against
`cloudflare.types.shared.ResponseInfo`, `result_info` against the five fields the
documentation shows (the library's page classes model only `page` and `per_page`).
"""

from __future__ import annotations

import json
import sys
import typing
from typing import Any, Callable, Optional

try:
    import pydantic
    from pydantic import TypeAdapter, ValidationError
    import typing_extensions
    from typing_extensions import is_typeddict

    import cloudflare
    from cloudflare.types.dns import record_create_params
    from cloudflare.types.dns import record_response
    from cloudflare.types.dns.dnssec import DNSSEC, ZskListResponse
    from cloudflare.types.dns.dnssec_edit_params import DNSSECEditParams
    from cloudflare.types.dns.record_delete_response import RecordDeleteResponse
    from cloudflare.types.dns.settings.zone_edit_params import ZoneEditParams
    from cloudflare.types.shared.response_info import ResponseInfo
    from cloudflare.types.zones.zone import Zone
except ImportError as e:  # the test command installs them; say what is missing
    print(f"cloudflare_check: missing package ({e}); pip install cloudflare", file=sys.stderr)
    sys.exit(2)

Problems = list[str]


def _fmt_loc(prefix: str, loc: tuple) -> str:
    parts = [prefix] if prefix else []
    for p in loc:
        # pydantic puts union branch names ("float", "literal[1]") in the location; keep
        # only the path a reader can find in the body
        if isinstance(p, int):
            parts.append(f"[{p}]")
        elif isinstance(p, str) and ("[" in p or p in ("float", "int", "str", "bool")):
            continue
        else:
            parts.append(str(p))
    out = ".".join(parts).replace(".[", "[")
    return out or "(body)"


def _errors(prefix: str, err: ValidationError) -> Problems:
    seen: dict[str, list[str]] = {}
    for e in err.errors():
        seen.setdefault(_fmt_loc(prefix, e["loc"]), []).append(e["msg"])
    return [f"{path}: {' / '.join(dict.fromkeys(msgs))}" for path, msgs in seen.items()]


def _join(prefix: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


# ---------------------------------------------------------------- responses (models)


def _model_extras(value: Any, path: str) -> Problems:
    """Fields the library's models do not name (they are extra="allow")."""
    out: Problems = []
    if isinstance(value, pydantic.BaseModel):
        for k in (value.model_extra or {}):
            out.append(f"{_join(path, k)}: not a field of {type(value).__name__} (cloudflare {cloudflare.__version__})")
        for name, field in type(value).model_fields.items():
            out += _model_extras(getattr(value, name), _join(path, field.alias or name))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _model_extras(v, _join(path, i))
    return out


def _validate(tp: Any, raw: Any, path: str) -> tuple[Any, Problems]:
    """Validates `raw` (already parsed JSON) against `tp`, strictly, in JSON mode."""
    text = json.dumps(raw)
    try:
        if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
            obj = tp.model_validate_json(text, strict=True)
        else:
            obj = TypeAdapter(tp).validate_json(text, strict=True)
    except ValidationError as e:
        return None, _errors(path, e)
    return obj, _model_extras(obj, path)


def _union_by_type(union: Any) -> dict[str, Any]:
    """The members of a union of DNS record classes, by their `type` literal."""
    out = {}
    for member in typing.get_args(union):
        if isinstance(member, type) and issubclass(member, pydantic.BaseModel):
            ann = member.model_fields["type"].annotation
        else:
            ann = typing.get_type_hints(member, include_extras=True)["type"]
        while typing.get_origin(ann) is not typing.Literal and typing.get_args(ann):
            ann = typing.get_args(ann)[0]  # Required[...], Annotated[...]
        for lit in typing.get_args(ann):
            out[lit] = member
    return out


RECORD_RESPONSE = _union_by_type(record_response.RecordResponse)
RECORD_CREATE = _union_by_type(record_create_params.RecordCreateParams)


def _record(raw: Any, path: str) -> Problems:
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return [f"{_join(path, 'type')}: missing, or not a string"]
    cls = RECORD_RESPONSE.get(raw["type"])
    if cls is None:
        return [f"{_join(path, 'type')}: {raw['type']!r} is no record type of RecordResponse"]
    _, probs = _validate(cls, raw, path)
    return probs + _whole_numbers(raw, path, ("ttl",)) + _dnskey_data(raw, path)


def _dnskey_data(raw: dict, path: str) -> Problems:
    if raw.get("type") != "DNSKEY" or not isinstance(raw.get("data"), dict):
        return []
    return _whole_numbers(raw["data"], _join(path, "data"), ("flags", "protocol", "algorithm"))


def _whole_numbers(raw: Any, path: str, keys: tuple) -> Problems:
    """Beyond the model: DNS integers the schema types as JSON `number`."""
    out = []
    if isinstance(raw, dict):
        for k in keys:
            v = raw.get(k)
            if isinstance(v, float) and not v.is_integer():
                out.append(f"{_join(path, k)}: {v} is not a whole number (beyond the model: a DNS integer)")
    return out


class _ResultInfo(pydantic.BaseModel):
    # the documentation's five; the library's page classes know only page and per_page
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    page: Optional[int] = None
    per_page: Optional[int] = None
    count: Optional[int] = None
    total_count: Optional[int] = None
    total_pages: Optional[int] = None


class _Envelope(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    success: bool
    errors: list[ResponseInfo]
    messages: list[ResponseInfo]
    result: Any = None
    result_info: Optional[_ResultInfo] = None


def _envelope(raw: Any, want_list: bool, success: bool = True) -> tuple[Any, Problems]:
    if not isinstance(raw, dict):
        return None, ["(body): not a JSON object"]
    env, probs = _validate(_Envelope, raw, "")
    if env is None:
        return None, probs
    if "result" not in raw:
        probs.append("result: missing (the envelope always carries it, null on failure)")
    if env.success != success:
        probs.append(f"success: {env.success} where this body should say {success}")
    if success and env.errors:
        probs.append("errors: not empty on success")
    if not success:
        if not env.errors:
            probs.append("errors: empty on failure")
        if env.result is not None:
            probs.append("result: not null on failure")
    if want_list and success:
        if not isinstance(env.result, list):
            probs.append("result: not a list")
        if env.result_info is None:
            probs.append("result_info: missing on a list")
    if not want_list and "result_info" in raw:
        probs.append("result_info: present on a single object (lists only)")
    return env.result, probs


def _single(tp: Any) -> Callable[[Any], Problems]:
    def check(raw: Any) -> Problems:
        result, probs = _envelope(raw, want_list=False)
        if probs:
            return probs
        if tp is None:
            return []
        _, p = _validate(tp, result, "result")
        return p + (_whole_numbers(result, "result", ("flags", "key_tag")) if tp is DNSSEC else [])

    return check


def _listed(tp: Any) -> Callable[[Any], Problems]:
    def check(raw: Any) -> Problems:
        result, probs = _envelope(raw, want_list=True)
        if probs:
            return probs
        out: Problems = []
        for i, item in enumerate(result):
            out += _validate(tp, item, f"result[{i}]")[1]
        return out

    return check


def _records_listed(raw: Any) -> Problems:
    result, probs = _envelope(raw, want_list=True)
    if probs:
        return probs
    out: Problems = []
    for i, item in enumerate(result):
        out += _record(item, f"result[{i}]")
    return out


def _record_single(raw: Any) -> Problems:
    result, probs = _envelope(raw, want_list=False)
    return probs or _record(result, "result")


def _error(raw: Any) -> Problems:
    return _envelope(raw, want_list=False, success=False)[1]


# ---------------------------------------------------------------- requests (TypedDicts)

# path and query parameters the library's params TypedDicts carry beside the body's fields
NOT_IN_BODY = {"zone_id", "include_shadow_metadata"}


def _hints(td: Any) -> dict[str, Any]:
    return typing.get_type_hints(td, include_extras=True)


def _td_unknown(td: Any, value: Any, path: str) -> Problems:
    """Keys a TypedDict (and those nested in it) does not name."""
    out: Problems = []
    if not isinstance(value, dict):
        return out
    hints = _hints(td)
    for k, v in value.items():
        if k not in hints or (not path and k in NOT_IN_BODY):
            out.append(f"{_join(path, k)}: not a field of {td.__name__} (cloudflare {cloudflare.__version__})")
            continue
        out += _walk_type(hints[k], v, _join(path, k))
    return out


def _walk_type(tp: Any, value: Any, path: str) -> Problems:
    tp = _unwrap(tp)
    if is_typeddict(tp):
        return _td_unknown(tp, value, path)
    origin = typing.get_origin(tp)
    if origin is not None and getattr(origin, "__name__", "") in ("list", "Sequence", "Iterable"):
        args = typing.get_args(tp)
        out: Problems = []
        if args and isinstance(value, list):
            for i, v in enumerate(value):
                out += _walk_type(args[0], v, _join(path, i))
        return out
    if origin is typing.Union:
        tds = [a for a in typing.get_args(tp) if is_typeddict(_unwrap(a))]
        if len(tds) == 1:
            return _walk_type(tds[0], value, path)
    return []


def _unwrap(tp: Any) -> Any:
    for _ in range(8):  # Required[Annotated[X, ...]] and the like: a few layers at most
        origin = typing.get_origin(tp)
        if origin in (typing.Annotated, typing_extensions.Required, typing_extensions.NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            break
    return tp


def _request(td: Any, extra_checks: Callable[[dict], Problems] = lambda _b: []) -> Callable[[Any], Problems]:
    def check(raw: Any) -> Problems:
        if not isinstance(raw, dict):
            return ["(body): not a JSON object"]
        probs = _td_unknown(td, raw, "")
        # the params TypedDicts require their path parameter: supply it, it is not the body's
        body = dict(raw)
        for k, tp in _hints(td).items():
            if k in NOT_IN_BODY and typing.get_origin(tp) is typing_extensions.Required:
                body[k] = "0" * 32
        try:
            TypeAdapter(td).validate_json(json.dumps(body), strict=True)
        except ValidationError as e:
            probs += _errors("", e)
        return probs + extra_checks(raw)

    return check


def _record_request(raw: Any) -> Problems:
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return ["type: missing, or not a string"]
    td = RECORD_CREATE.get(raw["type"])
    if td is None:
        return [f"type: {raw['type']!r} is no record type of RecordCreateParams"]
    return _request(td, lambda b: _whole_numbers(b, "", ("ttl",)) + _dnskey_data(b, ""))(raw)


def _dnssec_edit_request(raw: Any) -> Problems:
    probs = _request(DNSSECEditParams)(raw)
    if isinstance(raw, dict) and not (set(raw) - NOT_IN_BODY):
        probs.append("(body): no field to change (beyond the model: an empty PATCH changes nothing)")
    return probs


OPERATIONS: dict[str, tuple[str, Callable[[Any], Problems]]] = {
    "zones.list": ("GET /zones: envelope, result: list[cloudflare.types.zones.Zone]", _listed(Zone)),
    "zones.get": ("GET /zones/{zone_id}: envelope, result: Zone", _single(Zone)),
    "dnssec.get": ("GET /zones/{zone_id}/dnssec: envelope, result: cloudflare.types.dns.dnssec.DNSSEC", _single(DNSSEC)),
    "dnssec.edit": ("PATCH /zones/{zone_id}/dnssec: envelope, result: DNSSEC", _single(DNSSEC)),
    "dnssec.edit:request": (
        "PATCH /zones/{zone_id}/dnssec body: cloudflare.types.dns.dnssec_edit_params.DNSSECEditParams",
        _dnssec_edit_request,
    ),
    "dnssec.delete": ("DELETE /zones/{zone_id}/dnssec: envelope, result: str (DNSSECDeleteResponse)", _single(str)),
    "dnssec.zsk.list": (
        "GET /zones/{zone_id}/dnssec/zsk: envelope, result: list[ZskListResponse]",
        _listed(ZskListResponse),
    ),
    "dns_records.list": (
        "GET /zones/{zone_id}/dns_records: envelope, result: list of RecordResponse (by `type`)",
        _records_listed,
    ),
    "dns_records.create": ("POST /zones/{zone_id}/dns_records: envelope, result: RecordResponse", _record_single),
    "dns_records.create:request": (
        "POST /zones/{zone_id}/dns_records body: record_create_params.<TYPE>Record (by `type`)",
        _record_request,
    ),
    "dns_records.delete": (
        "DELETE /zones/{zone_id}/dns_records/{id}: envelope, result: RecordDeleteResponse",
        _single(RecordDeleteResponse),
    ),
    "dns_settings.edit:request": (
        "PATCH /zones/{zone_id}/dns_settings body: cloudflare.types.dns.settings.ZoneEditParams",
        _request(ZoneEditParams),
    ),
    "error": ("any call's failure: success false, errors[] of ResponseInfo, result null", _error),
}


def check(operation: str, text: str) -> Problems:
    if operation not in OPERATIONS:
        raise KeyError(operation)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        return [f"(body): not JSON ({e})"]
    return OPERATIONS[operation][1](raw)


# ---------------------------------------------------------------- self-test

ZONE_ID = "023e105f4ecef8ad9ca31a8372d0c353"
DS = "example.com. 3600 IN DS 2371 13 2 3EDA296C18ABFBD581F7DE282C61ED8634B27651F1740EA68C9FF9FAF6D1A66D"
GOOD_DNSSEC = {
    "algorithm": "13",
    "digest": "3EDA296C18ABFBD581F7DE282C61ED8634B27651F1740EA68C9FF9FAF6D1A66D",
    "digest_algorithm": "SHA256",
    "digest_type": "2",
    "dnssec_multi_signer": False,
    "dnssec_presigned": False,
    "dnssec_use_nsec3": False,
    "ds": DS,
    "flags": 257,
    "key_tag": 2371,
    "key_type": "ECDSAP256SHA256",
    "modified_on": "2026-11-29T12:00:00Z",
    "public_key": "mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
    "status": "pending",
}
GOOD_ZONE = {
    "id": ZONE_ID,
    "account": {"id": "01a7362d577a6c3019a474fd6f485823", "name": "lab"},
    "activated_on": None,
    "created_on": "2026-01-01T00:00:00Z",
    "development_mode": 0,
    "meta": {"dns_only": True},
    "modified_on": "2026-01-01T00:00:00Z",
    "name": "example.com",
    "name_servers": ["ns1.lab.", "ns2.lab."],
    "original_name_servers": None,
    "owner": {"id": None, "name": None, "type": "user"},
    "plan": {"id": "0feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "name": "Free Website"},
    "paused": False,
    "status": "active",
    "type": "full",
}
DNSKEY_RECORD = {
    "id": "372e67954025e0ba6aaa6d586b9e0b59",
    "name": "example.com",
    "type": "DNSKEY",
    "ttl": 3600,
    "content": "256 3 13 oJMRESz5E4gYzS/q6XDrvU1qMPYIjCWzJaOau8XNEZeqCYKD5ar0IRd8KqXXFJkqmVfRvMGPmM1x8fGAa2XhSA==",
    "data": {"flags": 256, "protocol": 3, "algorithm": 13,
             "public_key": "oJMRESz5E4gYzS/q6XDrvU1qMPYIjCWzJaOau8XNEZeqCYKD5ar0IRd8KqXXFJkqmVfRvMGPmM1x8fGAa2XhSA=="},
    "proxiable": False,
    "proxied": False,
    "comment": None,
    "tags": [],
    "settings": {},
    "meta": {},
    "created_on": "2026-11-29T12:00:00Z",
    "modified_on": "2026-11-29T12:00:00Z",
}


def _ok(result: Any, **extra: Any) -> dict:
    return {"success": True, "errors": [], "messages": [], "result": result, **extra}


def _page(items: list) -> dict:
    n = len(items)
    return _ok(items, result_info={"page": 1, "per_page": 50, "count": n, "total_count": n, "total_pages": 1})


def _with(d: dict, **changes: Any) -> dict:
    out = dict(d)
    for k, v in changes.items():
        if v is _DROP:
            out.pop(k, None)
        else:
            out[k] = v
    return out


_DROP = object()

# (operation, body, None for conforming or a fragment the first problem line must hold)
CASES: list[tuple[str, Any, Optional[str]]] = [
    ("dnssec.get", _ok(GOOD_DNSSEC), None),
    ("dnssec.get", _ok({"status": "disabled", "modified_on": None}), None),
    ("dnssec.edit", _ok(_with(GOOD_DNSSEC, status="pending-disabled")), None),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, status="enabled")), "result.status"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, algorithm=13)), "result.algorithm"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, key_tag="2371")), "result.key_tag"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, flags=257.5)), "result.flags"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, dnssec_multi_signer="false")), "result.dnssec_multi_signer"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, ksk="x")), "result.ksk"),
    ("dnssec.get", _ok(_with(GOOD_DNSSEC, modified_on="yesterday")), "result.modified_on"),
    ("dnssec.get", _with(_ok(GOOD_DNSSEC), messages=_DROP), "messages"),
    ("dnssec.get", _with(_ok(GOOD_DNSSEC), result_info={"page": 1}), "result_info"),
    ("dnssec.get", _with(_ok(GOOD_DNSSEC), success="true"), "success"),
    ("dnssec.edit:request", {"status": "active"}, None),
    ("dnssec.edit:request", {"status": "disabled", "dnssec_multi_signer": True}, None),
    ("dnssec.edit:request", {"status": "pending"}, "status"),
    ("dnssec.edit:request", {"enabled": True}, "enabled"),
    ("dnssec.edit:request", {"zone_id": ZONE_ID, "status": "active"}, "zone_id"),
    ("dnssec.edit:request", {}, "(body)"),
    ("dnssec.delete", _ok("ok"), None),
    ("dnssec.delete", _ok({"id": ZONE_ID}), "result"),
    ("zones.list", _page([GOOD_ZONE]), None),
    ("zones.list", _page([_with(GOOD_ZONE, name_servers=_DROP)]), "result[0].name_servers"),
    ("zones.list", _page([_with(GOOD_ZONE, status="deleted")]), "result[0].status"),
    ("zones.list", _ok([GOOD_ZONE]), "result_info"),
    ("zones.list", _page([_with(GOOD_ZONE, dnssec="on")]), "result[0].dnssec"),
    ("dns_records.list", _page([DNSKEY_RECORD]), None),
    ("dns_records.list", _page([_with(DNSKEY_RECORD, data=_with(DNSKEY_RECORD["data"], algorithm="13"))]),
     "result[0].data.algorithm"),
    ("dns_records.list", _page([_with(DNSKEY_RECORD, type="CDNSKEY")]), "result[0].type"),
    ("dns_records.create", _ok(_with(DNSKEY_RECORD, proxiable=_DROP)), "result.proxiable"),
    ("dns_records.create:request",
     {"type": "DNSKEY", "name": "example.com", "ttl": 3600,
      "data": {"flags": 256, "protocol": 3, "algorithm": 13, "public_key": DNSKEY_RECORD["data"]["public_key"]}},
     None),
    ("dns_records.create:request", {"type": "NS", "name": "example.com", "ttl": 86400, "content": "ns1.other.example"},
     None),
    ("dns_records.create:request", {"type": "DNSKEY", "name": "example.com", "ttl": 3600,
                                    "data": {"flags": 256, "protocol": 3, "algorithm": 13, "key": "x"}},
     "data.key"),
    ("dns_records.create:request", {"type": "DNSKEY", "name": "example.com", "ttl": "3600"}, "ttl"),
    ("dns_records.create:request", {"type": "DNSKEY", "ttl": 3600}, "name"),
    ("dns_records.delete", _ok({"id": "372e67954025e0ba6aaa6d586b9e0b59"}), None),
    ("dns_settings.edit:request", {"multi_provider": True}, None),
    ("dns_settings.edit:request", {"multi_provider": "yes"}, "multi_provider"),
    ("error", {"success": False, "errors": [{"code": 7003, "message": "Could not route to /zones/x/dnssec, perhaps your object identifier is invalid?"}],
               "messages": [], "result": None}, None),
    ("error", {"success": False, "errors": [{"code": "7003", "message": "x"}], "messages": [], "result": None},
     "errors[0].code"),
    ("error", {"success": False, "errors": [], "messages": [], "result": None}, "errors"),
    ("error", {"error": "zone is not found"}, "success"),
]


def self_test() -> int:
    failed = 0
    for op, body, want in CASES:
        probs = check(op, json.dumps(body))
        if want is None and probs:
            print(f"FAIL {op}: a conforming body was refused: {probs}")
            failed += 1
        elif want is not None and not any(p.startswith(want) for p in probs):
            print(f"FAIL {op}: expected a problem at {want!r}, got {probs or 'none'}")
            failed += 1
    print(f"cloudflare_check self-test (cloudflare {cloudflare.__version__}, pydantic {pydantic.VERSION}): "
          f"{len(CASES) - failed}/{len(CASES)} cases as expected")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:] == ["--list"]:
        for name, (what, _) in OPERATIONS.items():
            print(f"{name:28} {what}")
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        probs = check(argv[1], sys.stdin.read())
    except KeyError:
        print(f"cloudflare_check: unknown operation {argv[1]!r}; --list names them", file=sys.stderr)
        return 2
    for p in probs:
        print(f"{argv[1]}: {p}")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
