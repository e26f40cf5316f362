//! One lab name server: a UDP socket and a TCP listener on one loopback address, answering
//! from the shared [`World`]. UDP answers over the client's EDNS size (512 without EDNS)
//! are truncated (TC=1), so clients must come back over TCP.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;

use super::zone::World;

/// The running tasks of one server; dropping it stops the server and frees its sockets.
pub struct Running {
    tasks: JoinSet<()>,
}

impl Running {
    pub fn stop(mut self) {
        self.tasks.abort_all();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

/// Binds UDP and TCP at `addr` (the caller checked the port is free there).
pub async fn start(addr: SocketAddr, world: Arc<Mutex<World>>) -> std::io::Result<Running> {
    let udp = UdpSocket::bind(addr).await?;
    let tcp = TcpListener::bind(addr).await?;
    let mut tasks = JoinSet::new();
    let udp_world = world.clone();
    tasks.spawn(async move { serve_udp(udp, addr, udp_world).await });
    tasks.spawn(async move { serve_tcp(tcp, addr, world).await });
    Ok(Running { tasks })
}

fn respond(world: &Mutex<World>, server: SocketAddr, query: &[u8]) -> Option<(Message, u16)> {
    let query = Message::from_vec(query).ok()?;
    let limit = query
        .edns
        .as_ref()
        .map(|e| e.max_payload().max(512))
        .unwrap_or(512);
    let mut world = world.lock().unwrap_or_else(|p| p.into_inner());
    world.queries += 1;
    world.respond(server.ip(), &query).map(|m| (m, limit))
}

/// An RFC 2136 UPDATE's answer (a registry writing a DS); `None` for any other message,
/// which [`respond`] answers.
fn update(
    world: &Mutex<World>,
    server: SocketAddr,
    peer: SocketAddr,
    msg: &[u8],
) -> Option<Vec<u8>> {
    let opcode = msg.get(2).map(|b| (b >> 3) & 0xf)?;
    if opcode != crate::registry::msg::OPCODE_UPDATE {
        return None;
    }
    let mut world = world.lock().unwrap_or_else(|p| p.into_inner());
    // An UPDATE that cannot be answered gets a FORMERR rather than silence.
    world.update(server.ip(), peer.ip(), msg).or_else(|| {
        let id = u16::from_be_bytes([*msg.first()?, *msg.get(1)?]);
        let flags = u16::from_be_bytes([msg[2], *msg.get(3)?]);
        Some(crate::registry::msg::answer(
            id,
            flags,
            crate::registry::msg::RCODE_FORMERR,
            false,
            &[],
        ))
    })
}

async fn serve_udp(socket: UdpSocket, addr: SocketAddr, world: Arc<Mutex<World>>) {
    let mut buf = vec![0u8; 65_535];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        if let Some(answer) = buf.get(..len).and_then(|m| update(&world, addr, peer, m)) {
            let _ = socket.send_to(&answer, peer).await;
            continue;
        }
        let Some((answer, limit)) = buf.get(..len).and_then(|q| respond(&world, addr, q)) else {
            continue;
        };
        let Ok(mut wire) = answer.to_vec() else {
            continue;
        };
        if wire.len() > usize::from(limit) {
            let mut short = Message::new(
                answer.metadata.id,
                answer.metadata.message_type,
                answer.metadata.op_code,
            );
            short.metadata = answer.metadata;
            short.metadata.truncation = true;
            short.queries = answer.queries.clone();
            short.edns = answer.edns.clone();
            let Ok(w) = short.to_vec() else { continue };
            wire = w;
        }
        let _ = socket.send_to(&wire, peer).await;
    }
}

async fn serve_tcp(listener: TcpListener, addr: SocketAddr, world: Arc<Mutex<World>>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, peer)) = accepted {
                    let world = world.clone();
                    connections.spawn(async move { serve_connection(stream, addr, peer, world).await });
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    addr: SocketAddr,
    peer: SocketAddr,
    world: Arc<Mutex<World>>,
) {
    // A few queries per connection at most, then the client reconnects.
    for _ in 0..16 {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        if let Some(answer) = update(&world, addr, peer, &query) {
            let Ok(n) = u16::try_from(answer.len()) else {
                return;
            };
            let mut framed = n.to_be_bytes().to_vec();
            framed.extend_from_slice(&answer);
            if stream.write_all(&framed).await.is_err() {
                return;
            }
            continue;
        }
        let Some((answer, _)) = respond(&world, addr, &query) else {
            // Silence, as a dropped UDP query: hold the connection until the client gives up.
            let mut sink = [0u8; 1];
            let _ = stream.read(&mut sink).await;
            return;
        };
        let Ok(wire) = answer.to_vec() else { return };
        let Ok(n) = u16::try_from(wire.len()) else {
            return;
        };
        let mut framed = n.to_be_bytes().to_vec();
        framed.extend_from_slice(&wire);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}
