#!/usr/bin/env python3
"""Checks one Amazon Route 53 XML body against botocore's service model (route53 2013-04-01).

Usage:
    route53_check.py OPERATION [--request | --error] [--status N] [--any-list-item-name] < body.xml
    route53_check.py --self-test

OPERATION is botocore's operation name (GetDNSSEC, CreateKeySigningKey, ...). By default the
body is OPERATION's response; --request checks the request body (an operation whose input
has no body members must be sent with an empty body); --error checks an error answer
(<ErrorResponse>) to OPERATION. --status N checks the HTTP status as well: the model's
responseCode (200 unless it says otherwise: CreateKeySigningKey 201) or the error shape's
httpStatusCode. Exit status 0 when it conforms, 1 with one line per mismatch naming the
element (a path from the root), 2 on a usage error.

Strict means: the root element and namespace the REST-XML protocol gives; no element the
shape does not name; every required member present; no scalar member twice; enums as
the model lists them, and for the two status strings the model leaves open
(ServeSignature, SigningKeyStatus) the values its documentation lists (marked so in the
message); integers, booleans (true/false) and ISO 8601 timestamps well formed; integer
ranges; string lengths on requests only (answers carry prefixed IDs such as
/hostedzone/Z..., longer than ResourceId's max of 32). A list's items must carry the
member's XML name (`member` where the model gives none, as for KeySigningKeys);
--any-list-item-name accepts any name, as botocore's own parser does.

Headers (CreateKeySigningKey's Location) are not checked: the body is all this reads.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Optional

try:
    import botocore
    import botocore.session
    from botocore import parsers
except ImportError as e:
    print(f"route53_check: missing package ({e}); pip install botocore", file=sys.stderr)
    sys.exit(2)

NS = "https://route53.amazonaws.com/doc/2013-04-01/"

# Values the model's documentation lists for two strings it does not type as enums.
DOCUMENTED_ENUMS = {
    "ServeSignature": ["SIGNING", "NOT_SIGNING", "DELETING", "ACTION_NEEDED", "INTERNAL_FAILURE"],
    "SigningKeyStatus": ["ACTIVE", "INACTIVE", "DELETING", "ACTION_NEEDED", "INTERNAL_FAILURE"],
}

# Request members whose documentation narrows the shape's values further.
REQUEST_MEMBER_VALUES = {
    ("CreateKeySigningKeyRequest", "Status"): ["ACTIVE", "INACTIVE"],
}

# Codes any call may answer that no operation's error list in the model names: botocore's
# retry configuration (_retry.json: Throttling and PriorRequestNotComplete, both 400) and
# the AWS common errors of signing and authorisation.
SERVICE_WIDE_CODES = {
    "Throttling": 400,
    "PriorRequestNotComplete": 400,
    "ThrottlingException": 400,
    "AccessDenied": 403,
    "AccessDeniedException": 403,
    "IncompleteSignature": 403,
    "InvalidClientTokenId": 403,
    "SignatureDoesNotMatch": 403,
    "MissingAuthenticationToken": 403,
    "RequestExpired": 400,
    "ExpiredToken": 403,
    "InternalFailure": 500,
    "ServiceUnavailable": 503,
}

BODY_LOCATIONS = {None, ""}

Problems = list[str]


def service_model():
    return botocore.session.get_session().get_service_model("route53")


def _local(tag: str) -> tuple[Optional[str], str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return None, tag


class Walker:
    def __init__(self, request: bool, any_list_item_name: bool):
        self.request = request
        self.any_item = any_list_item_name
        self.problems: Problems = []
        self.ns_reported = False

    def bad(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def element(self, shape, el: ET.Element, path: str) -> None:
        ns, _ = _local(el.tag)
        if ns != NS and not self.ns_reported:
            self.ns_reported = True  # once: every element below inherits it
            self.bad(path, f"namespace {ns!r}, not {NS!r}")
        t = shape.type_name
        if t == "structure":
            self.structure(shape, el, path)
        elif t == "list":
            self.list(shape, el, path)
        elif t == "map":
            self.bad(path, "maps are not used by the operations checked here")
        else:
            if len(el):
                self.bad(path, f"a {t} ({shape.name}) holds child elements")
            self.scalar(shape, el.text or "", path)

    def structure(self, shape, el: ET.Element, path: str) -> None:
        if (el.text or "").strip():
            self.bad(path, f"text inside the structure {shape.name}")
        by_xml = {}
        for name, member in shape.members.items():
            if member.serialization.get("location") not in BODY_LOCATIONS:
                continue
            xml_name = member.serialization.get("name", name)
            by_xml[xml_name] = (name, member)
        seen: dict[str, int] = {}
        for child in el:
            _, cname = _local(child.tag)
            cpath = f"{path}/{cname}"
            if cname not in by_xml:
                self.bad(cpath, f"not a member of {shape.name} (botocore {botocore.__version__})")
                continue
            name, member = by_xml[cname]
            seen[cname] = seen.get(cname, 0) + 1
            flattened = member.type_name == "list" and member.serialization.get("flattened")
            if seen[cname] > 1 and not flattened:
                self.bad(cpath, "appears more than once")
                continue
            if flattened:
                self.element(member.member, child, cpath)
            else:
                self.element(member, child, cpath)
            narrowed = REQUEST_MEMBER_VALUES.get((shape.name, name)) if self.request else None
            if narrowed and (child.text or "") not in narrowed:
                self.bad(cpath, f"{child.text!r} is not one of {narrowed} (the documentation of {shape.name}.{name})")
        for name in shape.required_members:
            member = shape.members[name]
            if member.serialization.get("location") not in BODY_LOCATIONS:
                continue
            xml_name = member.serialization.get("name", name)
            if xml_name not in seen:
                self.bad(f"{path}/{xml_name}", f"required by {shape.name}, missing")

    def list(self, shape, el: ET.Element, path: str) -> None:
        if (el.text or "").strip():
            self.bad(path, f"text inside the list {shape.name}")
        item_name = shape.member.serialization.get("name", "member")
        for i, child in enumerate(el):
            _, cname = _local(child.tag)
            cpath = f"{path}/{cname}[{i}]"
            if cname != item_name and not self.any_item:
                self.bad(cpath, f"item of {shape.name} named {cname!r}; the model's name is {item_name!r}"
                                " (botocore's parser takes any name; --any-list-item-name does too)")
            self.element(shape.member, child, cpath)
        mn, mx = shape.metadata.get("min"), shape.metadata.get("max")
        if mn is not None and len(el) < mn:
            self.bad(path, f"{len(el)} items, fewer than {mn}")
        if mx is not None and len(el) > mx:
            self.bad(path, f"{len(el)} items, more than {mx}")

    def scalar(self, shape, text: str, path: str) -> None:
        t = shape.type_name
        if t == "string":
            enum = shape.metadata.get("enum")
            if enum and text not in enum:
                self.bad(path, f"{text!r} is not one of {enum} ({shape.name})")
            elif not enum and shape.name in DOCUMENTED_ENUMS and text not in DOCUMENTED_ENUMS[shape.name]:
                self.bad(path, f"{text!r} is not one of {DOCUMENTED_ENUMS[shape.name]} ({shape.name}: the values"
                               " its documentation lists; the model types it as a plain string)")
            if self.request:
                mn, mx = shape.metadata.get("min"), shape.metadata.get("max")
                if mn is not None and len(text) < mn:
                    self.bad(path, f"{len(text)} characters, fewer than {mn} ({shape.name})")
                if mx is not None and len(text) > mx:
                    self.bad(path, f"{len(text)} characters, more than {mx} ({shape.name})")
        elif t in ("integer", "long"):
            try:
                v = int(text.strip())
            except ValueError:
                self.bad(path, f"{text!r} is not an integer ({shape.name})")
                return
            if text != text.strip():
                self.bad(path, "whitespace around an integer")
            mn, mx = shape.metadata.get("min"), shape.metadata.get("max")
            if mn is not None and v < mn:
                self.bad(path, f"{v} below {mn} ({shape.name})")
            if mx is not None and v > mx:
                self.bad(path, f"{v} above {mx} ({shape.name})")
        elif t == "boolean":
            if text not in ("true", "false"):
                self.bad(path, f"{text!r} is not true or false")
        elif t == "timestamp":
            fmt = shape.serialization.get("timestampFormat", "iso8601")
            if fmt != "iso8601":
                self.bad(path, f"timestamp format {fmt} not checked here")
                return
            try:
                when = datetime.fromisoformat(text.strip())
            except ValueError:
                self.bad(path, f"{text!r} is not an ISO 8601 timestamp")
                return
            if when.tzinfo is None:
                self.bad(path, f"{text!r} carries no time zone (AWS answers UTC, Z)")
        else:
            self.bad(path, f"type {t} not checked here")


def _body_members(shape) -> list[str]:
    if shape is None:
        return []
    return [n for n, m in shape.members.items() if m.serialization.get("location") in BODY_LOCATIONS]


def _parse(text: str) -> tuple[Optional[ET.Element], Problems]:
    try:
        return ET.fromstring(text), []
    except ET.ParseError as e:
        return None, [f"(body): not well-formed XML ({e})"]


def check_response(op, text: str, any_item: bool) -> Problems:
    shape = op.output_shape
    if shape is None or not _body_members(shape):
        return [] if not text.strip() else ["(body): this operation answers no body"]
    root, probs = _parse(text)
    if root is None:
        return probs
    ns, name = _local(root.tag)
    want = shape.serialization.get("name", shape.name)
    w = Walker(request=False, any_list_item_name=any_item)
    if name != want:
        w.bad(f"/{name}", f"root element should be {want}")
    w.element(shape, root, f"/{name}")
    if not w.problems:
        # second opinion: botocore's own parser must take it too
        try:
            parsers.RestXMLParser().parse(
                {"body": text.encode(), "headers": {}, "status_code": op.http.get("responseCode", 200)}, shape)
        except Exception as e:  # the parser's own error types vary by version
            w.bad(f"/{name}", f"botocore's parser refused it: {e}")
    return w.problems


def check_request(op, text: str) -> Problems:
    shape = op.input_shape
    if shape is None or not _body_members(shape):
        return [] if not text.strip() else [
            f"(body): {op.name} sends no body (its input is all path, query or header)"]
    root, probs = _parse(text)
    if root is None:
        return probs
    ns, name = _local(root.tag)
    want = shape.serialization.get("name", shape.name)
    want_ns = shape.serialization.get("xmlNamespace", {}).get("uri", NS)
    w = Walker(request=True, any_list_item_name=False)
    if name != want:
        w.bad(f"/{name}", f"root element should be {want}")
    if ns != want_ns:
        w.bad(f"/{name}", f"namespace {ns!r}, not {want_ns!r}")
    w.element(shape, root, f"/{name}")
    return w.problems


def error_codes(op) -> dict[str, Optional[int]]:
    codes: dict[str, Optional[int]] = {}
    for e in op.error_shapes:
        err = e.metadata.get("error", {})
        codes[err.get("code", e.name)] = err.get("httpStatusCode")
    return codes


def check_error(op, text: str, status: Optional[int]) -> Problems:
    root, probs = _parse(text)
    if root is None:
        return probs
    w = Walker(request=False, any_list_item_name=False)
    ns, name = _local(root.tag)
    path = f"/{name}"
    if name != "ErrorResponse":
        w.bad(path, "root element should be ErrorResponse")
    if ns != NS:
        w.bad(path, f"namespace {ns!r}, not {NS!r}")
    errors = [c for c in root if _local(c.tag)[1] == "Error"]
    for c in root:
        cname = _local(c.tag)[1]
        if cname not in ("Error", "RequestId"):
            w.bad(f"{path}/{cname}", "not an element of ErrorResponse (Error, RequestId)")
    if len(errors) != 1:
        w.bad(f"{path}/Error", f"{len(errors)} Error elements, not one")
        return w.problems
    if not [c for c in root if _local(c.tag)[1] == "RequestId"]:
        w.bad(f"{path}/RequestId", "missing")
    err = errors[0]
    fields = {_local(c.tag)[1]: (c.text or "") for c in err}
    code = fields.get("Code")
    codes = error_codes(op)
    shape = None
    if code in codes:
        shape = service_model().shape_for(code)
    allowed = {"Type", "Code", "Message"}
    if shape is not None:
        # the error shape's own members (message) by their XML names; moto writes them
        allowed |= {m.serialization.get("name", n) for n, m in shape.members.items()}
    for c in err:
        cname = _local(c.tag)[1]
        if cname not in allowed:
            w.bad(f"{path}/Error/{cname}", f"not an element of Error ({sorted(allowed)})")
    if "Type" in fields and fields["Type"] not in ("Sender", "Receiver"):
        w.bad(f"{path}/Error/Type", f"{fields['Type']!r} is not Sender or Receiver")
    if code is None:
        w.bad(f"{path}/Error/Code", "missing")
        return w.problems
    if code in codes:
        want_status = codes[code]
    elif code in SERVICE_WIDE_CODES:
        want_status = SERVICE_WIDE_CODES[code]
    else:
        w.bad(f"{path}/Error/Code", f"{code!r} is not an error {op.name} can answer in the model "
                                    f"({sorted(codes)}) nor a service-wide one ({sorted(SERVICE_WIDE_CODES)})")
        return w.problems
    if status is not None and want_status is not None and status != want_status:
        w.bad("(status)", f"{status} for {code}; the model says {want_status}")
    if status is not None and want_status is None and not 400 <= status < 600:
        w.bad("(status)", f"{status} for {code}: an error must be 4xx/5xx (the model gives it no status)")
    return w.problems


def check(operation: str, text: str, mode: str = "response", status: Optional[int] = None,
          any_item: bool = False) -> Problems:
    model = service_model()
    if operation not in model.operation_names:
        raise KeyError(operation)
    op = model.operation_model(operation)
    if mode == "request":
        return check_request(op, text)
    if mode == "error":
        return check_error(op, text, status)
    probs = check_response(op, text, any_item)
    want = op.http.get("responseCode", 200)
    if status is not None and status != want:
        probs.append(f"(status): {status}; the model says {want} for {operation}")
    return probs


# ---------------------------------------------------------------- self-test

HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
X = f'xmlns="{NS}"'
KSK_BODY = (
    "<Name>warden_ksk_1</Name>"
    "<KmsArn>arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab</KmsArn>"
    "<Flag>257</Flag><SigningAlgorithmMnemonic>ECDSAP256SHA256</SigningAlgorithmMnemonic>"
    "<SigningAlgorithmType>13</SigningAlgorithmType><DigestAlgorithmMnemonic>SHA-256</DigestAlgorithmMnemonic>"
    "<DigestAlgorithmType>2</DigestAlgorithmType><KeyTag>{tag}</KeyTag>"
    "<DigestValue>0F8A0C4E5B2D3C1A9F8E7D6C5B4A39281706F5E4D3C2B1A09F8E7D6C5B4A3928</DigestValue>"
    "<PublicKey>mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==</PublicKey>"
    "<DSRecord>{tag} 13 2 0F8A0C4E5B2D3C1A9F8E7D6C5B4A39281706F5E4D3C2B1A09F8E7D6C5B4A3928</DSRecord>"
    "<DNSKEYRecord>257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==</DNSKEYRecord>"
    "<Status>{status}</Status><CreatedDate>2026-11-29T12:00:00Z</CreatedDate>"
    "<LastModifiedDate>2026-11-29T12:00:00.123Z</LastModifiedDate>"
)


def ksk(tag: str = "2371", status: str = "ACTIVE") -> str:
    return KSK_BODY.format(tag=tag, status=status)


def dnssec(serve: str = "SIGNING", keys: str = "", item: str = "member") -> str:
    ks = f"<KeySigningKeys>{keys}</KeySigningKeys>" if keys is not None else ""
    return (f"{HEAD}<GetDNSSECResponse {X}><Status><ServeSignature>{serve}</ServeSignature></Status>"
            f"{ks}</GetDNSSECResponse>")


def change(op: str, status: str = "PENDING", when: str = "2026-11-29T12:00:00.000Z") -> str:
    return (f"{HEAD}<{op}Response {X}><ChangeInfo><Id>/change/C2682N5HXP0BZ4</Id><Status>{status}</Status>"
            f"<SubmittedAt>{when}</SubmittedAt></ChangeInfo></{op}Response>")


ZONE = ("<HostedZone><Id>/hostedzone/Z0123456789ABCDEFGHIJ</Id><Name>example.com.</Name>"
        "<CallerReference>warden-1</CallerReference><Config><PrivateZone>false</PrivateZone></Config>"
        "<ResourceRecordSetCount>4</ResourceRecordSetCount></HostedZone>")


def err(code: str, extra: str = "") -> str:
    return (f"{HEAD}<ErrorResponse {X}><Error><Type>Sender</Type><Code>{code}</Code>"
            f"<Message>m</Message>{extra}</Error><RequestId>8e4b3a1c-0000-4000-8000-000000000000</RequestId>"
            "</ErrorResponse>")


CREATE_REQ = (f'<CreateKeySigningKeyRequest {X}><CallerReference>warden-ksk-1</CallerReference>'
              "<HostedZoneId>Z0123456789ABCDEFGHIJ</HostedZoneId>"
              "<KeyManagementServiceArn>arn:aws:kms:us-east-1:111122223333:key/1234abcd</KeyManagementServiceArn>"
              "<Name>{name}</Name><Status>{status}</Status>{extra}</CreateKeySigningKeyRequest>")

# (operation, mode, status, body, None if it conforms or the path the first problem names)
CASES: list[tuple[str, str, Optional[int], str, Optional[str]]] = [
    ("GetDNSSEC", "response", 200, dnssec("SIGNING", f"<member>{ksk()}</member>"), None),
    ("GetDNSSEC", "response", None, dnssec("NOT_SIGNING", ""), None),
    ("GetDNSSEC", "response", None,
     dnssec("SIGNING", f"<member>{ksk()}</member><member>{ksk('40000', 'INACTIVE')}</member>"), None),
    ("GetDNSSEC", "response", None, dnssec("ENABLED", ""), "/GetDNSSECResponse/Status/ServeSignature"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", f"<member>{ksk(status='ENABLED')}</member>"),
     "/GetDNSSECResponse/KeySigningKeys/member[0]/Status"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", f"<KeySigningKey>{ksk()}</KeySigningKey>"),
     "/GetDNSSECResponse/KeySigningKeys/KeySigningKey[0]"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", f"<member>{ksk(tag='x')}</member>"),
     "/GetDNSSECResponse/KeySigningKeys/member[0]/KeyTag"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", f"<member>{ksk(tag='70000')}</member>"),
     "/GetDNSSECResponse/KeySigningKeys/member[0]/KeyTag"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", f"<member>{ksk()}<Algorithm>13</Algorithm></member>"),
     "/GetDNSSECResponse/KeySigningKeys/member[0]/Algorithm"),
    # moto 5.2.5's answer: no KeySigningKeys at all, which the model requires
    ("GetDNSSEC", "response", None,
     f'{HEAD}<GetDNSSECResponse {X}><Status><ServeSignature>NOT_SIGNING</ServeSignature></Status></GetDNSSECResponse>',
     "/GetDNSSECResponse/KeySigningKeys"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", "").replace("GetDNSSECResponse", "GetDnssecResponse"),
     "/GetDnssecResponse"),
    ("GetDNSSEC", "response", None, dnssec("SIGNING", "").replace(NS, "https://route53.amazonaws.com/doc/2012-12-12/"),
     "/GetDNSSECResponse"),
    ("EnableHostedZoneDNSSEC", "response", 200, change("EnableHostedZoneDNSSEC"), None),
    ("DisableHostedZoneDNSSEC", "response", None, change("DisableHostedZoneDNSSEC", "DONE"),
     "/DisableHostedZoneDNSSECResponse/ChangeInfo/Status"),
    ("GetChange", "response", None, change("GetChange", "INSYNC"), None),
    ("GetChange", "response", None, change("GetChange", "INSYNC", "yesterday"),
     "/GetChangeResponse/ChangeInfo/SubmittedAt"),
    ("GetChange", "response", None, change("GetChange").replace("<Status>PENDING</Status>", ""),
     "/GetChangeResponse/ChangeInfo/Status"),
    ("ActivateKeySigningKey", "response", 201, change("ActivateKeySigningKey"), "(status)"),
    ("CreateKeySigningKey", "response", 201,
     f"{HEAD}<CreateKeySigningKeyResponse {X}><ChangeInfo><Id>/change/C1</Id><Status>PENDING</Status>"
     f"<SubmittedAt>2026-11-29T12:00:00Z</SubmittedAt></ChangeInfo><KeySigningKey>{ksk()}</KeySigningKey>"
     "</CreateKeySigningKeyResponse>", None),
    ("CreateKeySigningKey", "response", 200,
     f"{HEAD}<CreateKeySigningKeyResponse {X}><ChangeInfo><Id>/change/C1</Id><Status>PENDING</Status>"
     f"<SubmittedAt>2026-11-29T12:00:00Z</SubmittedAt></ChangeInfo><KeySigningKey>{ksk()}</KeySigningKey>"
     "</CreateKeySigningKeyResponse>", "(status)"),
    ("CreateKeySigningKey", "request", None, CREATE_REQ.format(name="warden_ksk_1", status="ACTIVE", extra=""), None),
    ("CreateKeySigningKey", "request", None, CREATE_REQ.format(name="k", status="ACTIVE", extra=""),
     "/CreateKeySigningKeyRequest/Name"),
    ("CreateKeySigningKey", "request", None, CREATE_REQ.format(name="warden_ksk_1", status="ON", extra=""),
     "/CreateKeySigningKeyRequest/Status"),
    ("CreateKeySigningKey", "request", None, CREATE_REQ.format(name="warden_ksk_1", status="INACTIVE", extra=""),
     None),
    ("CreateKeySigningKey", "request", None, CREATE_REQ.format(name="warden_ksk_1", status="DELETING", extra=""),
     "/CreateKeySigningKeyRequest/Status"),
    ("CreateKeySigningKey", "request", None,
     CREATE_REQ.format(name="warden_ksk_1", status="ACTIVE", extra="<Flag>257</Flag>"),
     "/CreateKeySigningKeyRequest/Flag"),
    ("CreateKeySigningKey", "request", None,
     CREATE_REQ.format(name="warden_ksk_1", status="ACTIVE", extra="").replace(
         "<CallerReference>warden-ksk-1</CallerReference>", ""),
     "/CreateKeySigningKeyRequest/CallerReference"),
    ("EnableHostedZoneDNSSEC", "request", None, "", None),
    ("EnableHostedZoneDNSSEC", "request", None, f"<EnableHostedZoneDNSSECRequest {X}/>", "(body)"),
    ("ListHostedZones", "response", None,
     f"{HEAD}<ListHostedZonesResponse {X}><HostedZones>{ZONE}</HostedZones><Marker></Marker>"
     "<IsTruncated>true</IsTruncated><NextMarker>Z1111111111111111111</NextMarker><MaxItems>1</MaxItems>"
     "</ListHostedZonesResponse>", None),
    ("ListHostedZones", "response", None,
     f"{HEAD}<ListHostedZonesResponse {X}><HostedZones>{ZONE}</HostedZones>"
     "<IsTruncated>false</IsTruncated><MaxItems>100</MaxItems></ListHostedZonesResponse>",
     "/ListHostedZonesResponse/Marker"),
    ("ListHostedZones", "response", None,
     f"{HEAD}<ListHostedZonesResponse {X}><HostedZones>{ZONE}</HostedZones><Marker/>"
     "<IsTruncated>yes</IsTruncated><MaxItems>100</MaxItems></ListHostedZonesResponse>",
     "/ListHostedZonesResponse/IsTruncated"),
    ("ListHostedZonesByName", "response", None,
     f"{HEAD}<ListHostedZonesByNameResponse {X}><HostedZones>{ZONE}</HostedZones><DNSName>example.com.</DNSName>"
     "<IsTruncated>false</IsTruncated><MaxItems>100</MaxItems></ListHostedZonesByNameResponse>", None),
    ("ListHostedZonesByName", "response", None,
     f"{HEAD}<ListHostedZonesByNameResponse {X}><HostedZones>{ZONE}</HostedZones><DNSName>example.com.</DNSName>"
     "</ListHostedZonesByNameResponse>", "/ListHostedZonesByNameResponse/IsTruncated"),
    ("GetDNSSEC", "error", 404, err("NoSuchHostedZone"), None),
    ("GetDNSSEC", "error", 400, err("NoSuchHostedZone"), "(status)"),
    ("DisableHostedZoneDNSSEC", "error", 400, err("KeySigningKeyInParentDSRecord"), None),
    ("EnableHostedZoneDNSSEC", "error", 400, err("KeySigningKeyInParentDSRecord"), "/ErrorResponse/Error/Code"),
    ("EnableHostedZoneDNSSEC", "error", 400, err("HostedZonePartiallyDelegated"), None),
    ("DeactivateKeySigningKey", "error", 400, err("Throttling"), None),
    ("DeactivateKeySigningKey", "error", 429, err("Throttling"), "(status)"),
    # moto writes the error shape's own member beside Message
    ("GetDNSSEC", "error", 404, err("NoSuchHostedZone", "<message>m</message>"), None),
    ("GetDNSSEC", "error", 404, err("NoSuchHostedZone", "<Detail>x</Detail>"), "/ErrorResponse/Error/Detail"),
    ("GetDNSSEC", "error", 404, '<Error><Code>NoSuchBucket</Code></Error>', "/Error"),
]


def self_test() -> int:
    failed = 0
    for op, mode, status, body, want in CASES:
        probs = check(op, body, mode, status)
        if want is None and probs:
            print(f"FAIL {op} {mode}: a conforming body was refused: {probs}")
            failed += 1
        elif want is not None and not any(p.startswith(want) for p in probs):
            print(f"FAIL {op} {mode}: expected a problem at {want!r}, got {probs or 'none'}")
            failed += 1
    print(f"route53_check self-test (botocore {botocore.__version__}): "
          f"{len(CASES) - failed}/{len(CASES)} cases as expected")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    mode, status, any_item, ops = "response", None, False, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--request":
            mode = "request"
        elif a == "--error":
            mode = "error"
        elif a == "--any-list-item-name":
            any_item = True
        elif a == "--status" and i + 1 < len(args) and args[i + 1].isdigit():
            status = int(args[i + 1])
            i += 1
        elif a.startswith("-"):
            ops = []
            break
        else:
            ops.append(a)
        i += 1
    if len(ops) != 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        probs = check(ops[0], sys.stdin.read(), mode, status, any_item)
    except KeyError:
        print(f"route53_check: {ops[0]!r} is no operation of botocore's route53 model", file=sys.stderr)
        return 2
    for p in probs:
        print(f"{ops[0]}: {p}")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
