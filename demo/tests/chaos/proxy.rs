//! The proxies: a noxious proxy on each of the chain's links, the toxics the run puts in
//! them, and the free loopback ports they and db listen on.

use std::net::{SocketAddr, TcpListener as StdListener};

use noxious::proxy::{ProxyConfig, ProxyRunner, Runner, Toxics};
use noxious::signal::{Close, Stop, Stopper};
use noxious::socket::TcpListener as ProxyListener;
use noxious::state::SharedProxyInfo;
use noxious::toxic::{
    StreamDirection, Toxic, ToxicEvent, ToxicEventKind, ToxicEventResult, ToxicKind,
};

use super::PATIENCE;

pub(super) fn toxic(name: &str, direction: StreamDirection, kind: ToxicKind) -> Toxic {
    Toxic {
        kind,
        name: name.to_owned(),
        toxicity: 1.0,
        direction,
    }
}

/// db's answers cut after `bytes` on each connection.
pub(super) fn cut(bytes: u64) -> Toxic {
    toxic(
        "cut",
        StreamDirection::Downstream,
        ToxicKind::LimitData { bytes },
    )
}

/// A loopback port free a moment ago.
pub(super) fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A noxious proxy on a loopback port of its own, taking toxics at run time.
pub(super) struct Proxy {
    pub(super) name: String,
    pub(super) addr: SocketAddr,
    events: bmrng::RequestSender<ToxicEvent, ToxicEventResult>,
    stopper: Stopper,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    info: SharedProxyInfo,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` with `toxics` from the start.
    pub(super) async fn start(name: &str, upstream: SocketAddr, toxics: Toxics) -> Self {
        // noxious binds the address it is given and does not tell the port: pick one, and
        // pick again should something take it in between.
        for _ in 0..10 {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let config = ProxyConfig {
                name: name.to_owned(),
                listen: addr.to_string(),
                upstream: upstream.to_string(),
                enabled: true,
                rand_seed: None,
            };
            let Ok((listener, info)) =
                ProxyRunner::initialize_proxy::<ProxyListener>(config, toxics.clone()).await
            else {
                continue;
            };
            let (events, receiver) = bmrng::channel(1);
            let (stop, stopper) = Stop::new();
            let (_closed, closer) = Close::new();
            let task = tokio::spawn(ProxyRunner::run_proxy(
                listener,
                info.clone(),
                receiver,
                stop,
                closer,
            ));
            return Self {
                name: name.to_owned(),
                addr,
                events,
                stopper,
                task,
                info,
            };
        }
        panic!("no free port for the {name} proxy");
    }

    pub(super) async fn add(&self, toxic: Toxic) {
        self.send(ToxicEventKind::AddToxic(toxic)).await;
    }

    pub(super) async fn remove(&self, name: &str) {
        self.send(ToxicEventKind::RemoveToxic(name.to_owned()))
            .await;
    }

    /// The connections open to the proxy, and how many of them noxious knows of (and so
    /// changes the toxics of). From /proc/net/tcp: the accepted ends, established.
    pub(super) fn connections(&self) -> (usize, usize) {
        let port = format!(":{:04X} ", self.addr.port());
        let open = std::fs::read_to_string("/proc/net/tcp")
            .unwrap_or_default()
            .lines()
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() > 3 && format!("{} ", fields[1]).ends_with(&port) && fields[3] == "01"
            })
            .count();
        (open, self.info.state.lock().clients.len())
    }

    /// Changes the toxics: noxious applies a change to every open connection before it
    /// answers.
    async fn send(&self, kind: ToxicEventKind) {
        let event = ToxicEvent::new(self.name.clone(), kind);
        tokio::time::timeout(PATIENCE, self.events.send_receive(event))
            .await
            .unwrap_or_else(|_| panic!("the {} proxy took no toxic change in time", self.name))
            .expect("the proxy listens for toxic changes")
            .expect("the proxy accepts the toxic change");
    }

    /// Stops the proxy; whether it was still serving.
    pub(super) fn stop(self) -> bool {
        let alive = !self.task.is_finished();
        self.stopper.stop();
        alive
    }
}
