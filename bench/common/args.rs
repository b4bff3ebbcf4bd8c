//! The command-line arguments roce-lat and roce-bw share, in groups each program flattens into
//! its own `Args` (`#[command(flatten)]`): the peer (side, server address, port), the payloads
//! (zero-copy, checking) and perftest's flags that change nothing here.

use dpdk_roce::dpdk::{DpdkFrameIo, Port};
use std::net::IpAddr;

/// Which side this process plays and where the server is, as perftest takes them.
#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    /// Run the server side (listens, answers). The default without a server address.
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Run the client side (connects, measures).
    #[arg(long)]
    pub client: bool,
    /// The server's RoCE address (client only; without --server it makes this side the
    /// client).
    #[arg(long)]
    pub server_ip: Option<IpAddr>,
    /// The server's address as perftest takes it: given, this side is the client.
    #[arg(value_name = "SERVER")]
    pub server_addr: Option<IpAddr>,
    /// rdma_cm port to listen on / connect to.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
}

impl PeerArgs {
    /// Settles the side as perftest decides it: a server address (positional as perftest
    /// takes it, `ib_write_lat 10.0.0.1`, or `--server-ip`) or `--client` makes the client;
    /// with neither it is the server, perftest's program without an address. `--server` says
    /// so explicitly and may come with `--server-ip` (scripts/run-pair.sh gives both sides the
    /// same arguments), never with a positional address. On return exactly one of `server` and
    /// `client` is set, and `server_ip` holds a positional address.
    pub fn resolve_role(&mut self) -> Result<(), String> {
        if let Some(a) = self.server_addr {
            if self.server {
                return Err("a server address makes this side the client: drop --server".into());
            }
            if self.server_ip.is_some_and(|s| s != a) {
                return Err(format!(
                    "two server addresses: {a} and --server-ip {:?}",
                    self.server_ip
                ));
            }
            self.server_ip = Some(a);
            self.client = true;
        }
        if !self.server && !self.client {
            self.client = self.server_ip.is_some();
        }
        self.server = !self.client;
        Ok(())
    }
}

/// How payloads leave and whether every byte is checked.
#[derive(clap::Args, Debug)]
pub struct PayloadArgs {
    /// Check every byte of every message (slower; for tests).
    #[arg(long)]
    pub verify: bool,
    /// Smallest payload sent zero-copy (attached from registered memory); default: the port's.
    #[arg(long, conflicts_with = "no_zero_copy")]
    pub zero_copy_min: Option<usize>,
    /// Copy every payload into the frame (no external buffers).
    #[arg(long)]
    pub no_zero_copy: bool,
}

impl PayloadArgs {
    /// Sets `io`'s zero-copy threshold as `--no-zero-copy` or `--zero-copy-min` ask; without
    /// either `io` keeps the port's.
    pub fn set_zero_copy(&self, io: &mut DpdkFrameIo, port: &Port) -> Result<(), String> {
        let min = if self.no_zero_copy {
            None
        } else if let Some(min) = self.zero_copy_min {
            Some(min)
        } else {
            return Ok(());
        };
        io.set_zero_copy_min(min, port).map_err(|e| e.to_string())
    }
}

/// perftest's flags accepted so that its command lines run unchanged.
#[derive(clap::Args, Debug)]
pub struct PerftestCompat {
    /// Accepted for perftest's command lines (it ignores a CPU frequency warning there);
    /// this tool reads no CPU frequency, so it changes nothing.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        peer: PeerArgs,
    }

    /// The side `args` settle on: `Ok((server, client, server_ip))`.
    fn side(args: &[&str]) -> Result<(bool, bool, Option<IpAddr>), String> {
        let mut peer = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?
            .peer;
        peer.resolve_role()?;
        Ok((peer.server, peer.client, peer.server_ip))
    }

    #[test]
    fn perftest_rule_decides_the_side() {
        let ip: IpAddr = "10.77.0.1".parse().unwrap();
        assert_eq!(side(&[]), Ok((true, false, None)));
        assert_eq!(side(&["10.77.0.1"]), Ok((false, true, Some(ip))));
        assert_eq!(
            side(&["--server-ip", "10.77.0.1"]),
            Ok((false, true, Some(ip)))
        );
        assert_eq!(
            side(&["--server", "--server-ip", "10.77.0.1"]),
            Ok((true, false, Some(ip)))
        );
        assert_eq!(
            side(&["--client", "--server-ip", "10.77.0.1", "10.77.0.1"]),
            Ok((false, true, Some(ip)))
        );
        assert!(side(&["--server", "10.77.0.1"])
            .unwrap_err()
            .contains("drop --server"));
        assert!(side(&["--server-ip", "10.77.0.2", "10.77.0.1"])
            .unwrap_err()
            .contains("two server addresses"));
        assert!(side(&["--server", "--client"]).is_err());
    }
}
