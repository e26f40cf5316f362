//! The registry's DNS messages in wire form, written by hand: the questions it asks, the
//! UPDATE it sends, the NOTIFY it answers, and a parser that keeps every record's RDATA
//! as it came (the signatures are checked over exactly those bytes). Every count, name
//! and pointer chain is bounded, so a hostile answer costs little.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

pub const TYPE_A: u16 = 1;
pub const TYPE_NS: u16 = 2;
pub const TYPE_SOA: u16 = 6;
pub const TYPE_AAAA: u16 = 28;
pub const TYPE_OPT: u16 = 41;
pub const TYPE_DS: u16 = 43;
pub const TYPE_RRSIG: u16 = 46;
pub const TYPE_DNSKEY: u16 = 48;
pub const TYPE_CDS: u16 = 59;
pub const TYPE_CDNSKEY: u16 = 60;
pub const CLASS_IN: u16 = 1;
pub const CLASS_NONE: u16 = 254;
pub const CLASS_ANY: u16 = 255;

pub const OPCODE_QUERY: u8 = 0;
pub const OPCODE_NOTIFY: u8 = 4;
pub const OPCODE_UPDATE: u8 = 5;

pub const RCODE_NOERROR: u8 = 0;
pub const RCODE_FORMERR: u8 = 1;
pub const RCODE_NXDOMAIN: u8 = 3;
pub const RCODE_REFUSED: u8 = 5;
pub const RCODE_NOTAUTH: u8 = 9;

/// Records read from one message at most, over all sections.
pub const MAX_RECORDS: usize = 256;

pub fn type_name(rtype: u16) -> String {
    match rtype {
        TYPE_A => "A".into(),
        TYPE_NS => "NS".into(),
        TYPE_SOA => "SOA".into(),
        TYPE_AAAA => "AAAA".into(),
        TYPE_DS => "DS".into(),
        TYPE_RRSIG => "RRSIG".into(),
        TYPE_DNSKEY => "DNSKEY".into(),
        TYPE_CDS => "CDS".into(),
        TYPE_CDNSKEY => "CDNSKEY".into(),
        other => format!("TYPE{other}"),
    }
}

pub fn rcode_name(rcode: u8) -> String {
    match rcode {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        9 => "NOTAUTH".into(),
        other => format!("RCODE{other}"),
    }
}

/// A name in wire form as text (`\DDD` for what is not a plain host-name octet).
pub fn name_text(wire: &[u8]) -> String {
    let mut out = String::new();
    let mut at = 0;
    while let Some(&len) = wire.get(at) {
        if len == 0 {
            break;
        }
        let label = wire
            .get(at + 1..at + 1 + usize::from(len))
            .unwrap_or_default();
        for &b in label {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'*' {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("\\{b:03}"));
            }
        }
        out.push('.');
        at += 1 + usize::from(len);
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// One resource record; its owner in lower-case wire form, its RDATA as sent (for NS,
/// `target` is the name it holds, decompressed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rr {
    pub owner: Vec<u8>,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    pub rdata: Vec<u8>,
    pub target: Option<Vec<u8>>,
}

/// A parsed message: header fields, the first question, the three record sections.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub id: u16,
    pub flags: u16,
    pub qdcount: u16,
    pub question: Option<(Vec<u8>, u16, u16)>,
    /// Where the question section ends (a NOTIFY's answer echoes the bytes before it).
    pub question_end: usize,
    pub answers: Vec<Rr>,
    pub authority: Vec<Rr>,
    pub additional: Vec<Rr>,
}

impl Message {
    pub fn is_response(&self) -> bool {
        self.flags & 0x8000 != 0
    }
    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0xf) as u8
    }
    pub fn authoritative(&self) -> bool {
        self.flags & 0x0400 != 0
    }
    pub fn truncated(&self) -> bool {
        self.flags & 0x0200 != 0
    }
    pub fn rcode(&self) -> u8 {
        (self.flags & 0xf) as u8
    }

    /// The RDATAs of `owner`'s `rtype` records in the answer section (class IN).
    pub fn rrset(&self, owner: &[u8], rtype: u16) -> Vec<Vec<u8>> {
        self.answers
            .iter()
            .filter(|r| r.owner == owner && r.rtype == rtype && r.class == CLASS_IN)
            .map(|r| r.rdata.clone())
            .collect()
    }

    /// The RDATAs of `owner`'s RRSIGs over `rtype` in the answer section.
    pub fn rrsigs(&self, owner: &[u8], rtype: u16) -> Vec<Vec<u8>> {
        self.answers
            .iter()
            .filter(|r| {
                r.owner == owner
                    && r.rtype == TYPE_RRSIG
                    && r.rdata.get(..2) == Some(&rtype.to_be_bytes()[..])
            })
            .map(|r| r.rdata.clone())
            .collect()
    }
}

/// Reads a (possibly compressed) name at `at`: the name in lower-case wire form and where
/// the bytes after it start. Pointers must point backwards, so a chain ends.
pub fn read_name(msg: &[u8], mut at: usize) -> Option<(Vec<u8>, usize)> {
    let mut name = Vec::new();
    let mut end = None;
    let mut limit = at;
    for _ in 0..128 {
        let len = *msg.get(at)?;
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    name.push(0);
                    if name.len() > 255 {
                        return None;
                    }
                    return Some((name, end.unwrap_or(at + 1)));
                }
                let label = msg.get(at + 1..at + 1 + usize::from(len))?;
                name.push(len);
                name.extend(label.iter().map(u8::to_ascii_lowercase));
                if name.len() > 255 {
                    return None;
                }
                at += 1 + usize::from(len);
            }
            0xc0 => {
                let target = usize::from(u16::from_be_bytes([len & 0x3f, *msg.get(at + 1)?]));
                if target >= limit {
                    return None;
                }
                end.get_or_insert(at + 2);
                limit = target;
                at = target;
            }
            _ => return None,
        }
    }
    None
}

/// Parses a whole message; `None` if it is malformed or holds more than `MAX_RECORDS`.
pub fn parse(msg: &[u8]) -> Option<Message> {
    let header = msg.get(..12)?;
    let word = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
    let mut m = Message {
        id: word(0),
        flags: word(2),
        qdcount: word(4),
        ..Message::default()
    };
    let (an, ns, ar) = (word(6), word(8), word(10));
    if usize::from(an) + usize::from(ns) + usize::from(ar) > MAX_RECORDS || m.qdcount > 1 {
        return None;
    }
    let mut at = 12;
    if m.qdcount == 1 {
        let (name, next) = read_name(msg, at)?;
        let fixed = msg.get(next..next + 4)?;
        m.question = Some((
            name,
            u16::from_be_bytes([fixed[0], fixed[1]]),
            u16::from_be_bytes([fixed[2], fixed[3]]),
        ));
        at = next + 4;
    }
    m.question_end = at;
    for (count, section) in [(an, 0), (ns, 1), (ar, 2)] {
        for _ in 0..count {
            let (owner, next) = read_name(msg, at)?;
            let fixed = msg.get(next..next + 10)?;
            let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
            let class = u16::from_be_bytes([fixed[2], fixed[3]]);
            let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
            let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
            let start = next + 10;
            let rdata = msg.get(start..start + len)?.to_vec();
            let target = if rtype == TYPE_NS {
                Some(read_name(msg, start)?.0)
            } else {
                None
            };
            at = start + len;
            let rr = Rr {
                owner,
                rtype,
                class,
                ttl,
                rdata,
                target,
            };
            match section {
                0 => m.answers.push(rr),
                1 => m.authority.push(rr),
                _ => m.additional.push(rr),
            }
        }
    }
    Some(m)
}

fn header(id: u16, flags: u16, counts: [u16; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    for c in counts {
        out.extend_from_slice(&c.to_be_bytes());
    }
    out
}

/// A query without recursion, with EDNS (1232 octets) and DO=1 when `dnssec_ok`.
pub fn query(id: u16, name: &[u8], qtype: u16, dnssec_ok: bool) -> Vec<u8> {
    let mut out = header(id, 0, [1, 0, 0, 1]);
    out.extend_from_slice(name);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT: root owner, type 41, payload size as class, flags in the TTL's low half.
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&1232u16.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(if dnssec_ok { 0x8000u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out
}

/// An RFC 2136 UPDATE of `zone`: the `owner`'s DS RRset deleted, then `add` (DS RDATAs)
/// added with `ttl`.
pub fn update_ds(id: u16, zone: &[u8], owner: &[u8], ttl: u32, add: &[Vec<u8>]) -> Option<Vec<u8>> {
    let count = u16::try_from(add.len() + 1).ok()?;
    let mut out = header(id, u16::from(OPCODE_UPDATE) << 11, [1, 0, count, 0]);
    out.extend_from_slice(zone);
    out.extend_from_slice(&TYPE_SOA.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    // Delete an RRset (RFC 2136 section 2.5.2): class ANY, TTL 0, no RDATA.
    out.extend_from_slice(owner);
    out.extend_from_slice(&TYPE_DS.to_be_bytes());
    out.extend_from_slice(&CLASS_ANY.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for rdata in add {
        out.extend_from_slice(owner);
        out.extend_from_slice(&TYPE_DS.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&u16::try_from(rdata.len()).ok()?.to_be_bytes());
        out.extend_from_slice(rdata);
    }
    Some(out)
}

/// The answer to a request: its ID, QR=1, its opcode and RD, AA when `authoritative`,
/// `rcode`, and its question echoed when there is one to echo (`question` the bytes
/// from the header's end to the question's end).
pub fn answer(
    id: u16,
    request_flags: u16,
    rcode: u8,
    authoritative: bool,
    question: &[u8],
) -> Vec<u8> {
    let mut flags = 0x8000 | (request_flags & 0x7900) | u16::from(rcode & 0xf);
    if authoritative {
        flags |= 0x0400;
    }
    let qd = u16::from(!question.is_empty());
    let mut out = header(id, flags, [qd, 0, 0, 0]);
    out.extend_from_slice(question);
    out
}

/// One exchange over TCP from `source` (so the server's ACL sees the registry's own
/// address), within `timeout`; the response's bytes.
pub async fn exchange_tcp(
    source: IpAddr,
    server: SocketAddr,
    request: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let len = u16::try_from(request.len()).map_err(|_| "request too long".to_string())?;
    let work = async {
        let socket = match source {
            IpAddr::V4(_) => TcpSocket::new_v4(),
            IpAddr::V6(_) => TcpSocket::new_v6(),
        }
        .map_err(|e| e.to_string())?;
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(|e| format!("bind {source}: {e}"))?;
        let mut stream = socket.connect(server).await.map_err(|e| e.to_string())?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(request);
        stream.write_all(&framed).await.map_err(|e| e.to_string())?;
        let mut len = [0u8; 2];
        stream
            .read_exact(&mut len)
            .await
            .map_err(|e| e.to_string())?;
        let mut response = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream
            .read_exact(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(response)
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

/// Asks `server` over TCP; the parsed answer, tied to the question by ID, QR and question.
pub async fn ask(
    source: IpAddr,
    server: SocketAddr,
    name: &[u8],
    qtype: u16,
    timeout: Duration,
) -> Result<Message, String> {
    let id = fastrand::u16(..);
    let bytes = exchange_tcp(source, server, &query(id, name, qtype, true), timeout).await?;
    let m = parse(&bytes).ok_or_else(|| "a malformed answer".to_string())?;
    if m.id != id || !m.is_response() || m.opcode() != OPCODE_QUERY {
        return Err("an answer to another question".into());
    }
    if m.question
        .as_ref()
        .is_some_and(|(n, t, _)| n.as_slice() != name || *t != qtype)
    {
        return Err("an answer to another question".into());
    }
    if m.truncated() {
        return Err("a truncated answer over TCP".into());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_decompress_and_pointer_loops_end() {
        // "a.b." at 12, then a pointer to it at 17.
        let mut msg = vec![0u8; 12];
        msg.extend_from_slice(&[1, b'A', 1, b'b', 0, 0xc0, 12]);
        assert_eq!(read_name(&msg, 12), Some((vec![1, b'a', 1, b'b', 0], 17)));
        assert_eq!(read_name(&msg, 17), Some((vec![1, b'a', 1, b'b', 0], 19)));
        // A pointer to itself, and one forwards.
        let mut looped = vec![0u8; 12];
        looped.extend_from_slice(&[0xc0, 12]);
        assert_eq!(read_name(&looped, 12), None);
        let mut forward = vec![0u8; 12];
        forward.extend_from_slice(&[0xc0, 14, 0]);
        assert_eq!(read_name(&forward, 12), None);
        assert_eq!(name_text(&[1, b'a', 1, b'b', 0]), "a.b.");
    }

    #[test]
    fn a_query_parses_back_and_truncated_messages_do_not() {
        let name = [2, b'p', b'd', 4, b't', b'e', b's', b't', 0];
        let q = query(7, &name, TYPE_CDS, true);
        let m = parse(&q).unwrap();
        assert_eq!(m.id, 7);
        assert_eq!(m.question, Some((name.to_vec(), TYPE_CDS, CLASS_IN)));
        assert_eq!(m.additional.len(), 1);
        for cut in 0..q.len() {
            assert!(parse(&q[..cut]).is_none(), "cut at {cut}");
        }
    }
}
