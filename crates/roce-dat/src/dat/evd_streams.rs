//! Which EP completion streams feed an EVD, and the completion-flag compatibility rules of
//! dat_ep_create(3DAT) (USAGE) that `dat_ep_create` and `dat_ep_modify` enforce:
//! - every EP request/recv completion stream on one EVD has the same completion flags;
//! - an EVD also fed by a non-DTO stream (connection, CR, async, software) takes only
//!   DAT_COMPLETION_EVD_THRESHOLD (or the default) completion flags;
//! - a recv stream with DAT_COMPLETION_SOLICITED_WAIT needs an EVD no other stream type feeds
//!   (no request completions, no other event streams).

use super::ep_attr::CompletionFlags;
use super::evd_flags::EvdFlags;

/// The two DTO completion streams of an EP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Recv,
    Request,
}

/// The EP completion streams an EVD carries.
#[derive(Debug, Default)]
pub(crate) struct DtoStreams {
    flags: CompletionFlags,
    recv: u32,
    request: u32,
}

impl DtoStreams {
    /// Adds a stream of `kind` with `flags` to an EVD of `evd_flags`, or says why it cannot.
    pub(crate) fn attach(
        &mut self,
        evd_flags: EvdFlags,
        kind: Stream,
        flags: CompletionFlags,
    ) -> Result<(), &'static str> {
        // Bind completions are request completions here: an EVD of either flag takes both
        // (as the C entry always let it).
        let evd_flags = if evd_flags.intersects(EvdFlags::DTO | EvdFlags::RMR_BIND) {
            evd_flags | EvdFlags::DTO | EvdFlags::RMR_BIND
        } else {
            return Err("EVD without the DTO flag");
        };
        let others = evd_flags - (EvdFlags::DTO | EvdFlags::RMR_BIND);
        if !others.is_empty() && !CompletionFlags::EVD_THRESHOLD.contains(flags) {
            return Err("an EVD fed by other event streams takes only EVD_THRESHOLD completions");
        }
        if self.recv + self.request > 0 && flags != self.flags {
            return Err("completion flags differ from the other streams of this EVD");
        }
        let solicited = self.recv > 0 && self.flags.contains(CompletionFlags::SOLICITED_WAIT);
        if kind == Stream::Request && solicited {
            return Err("a solicited-wait receive EVD carries no request completions");
        }
        if kind == Stream::Recv && flags.contains(CompletionFlags::SOLICITED_WAIT) {
            if self.request > 0 {
                return Err("a solicited-wait receive EVD carries no request completions");
            }
            if evd_flags != EvdFlags::DTO | EvdFlags::RMR_BIND {
                return Err("a solicited-wait receive EVD carries no other event stream");
            }
        }
        self.flags = flags;
        match kind {
            Stream::Recv => self.recv += 1,
            Stream::Request => self.request += 1,
        }
        Ok(())
    }

    /// Removes a stream added by `attach`.
    pub(crate) fn detach(&mut self, kind: Stream) {
        match kind {
            Stream::Recv => self.recv = self.recv.saturating_sub(1),
            Stream::Request => self.request = self.request.saturating_sub(1),
        }
    }

    /// EP streams attached.
    #[cfg(test)]
    pub(crate) fn users(&self) -> u32 {
        self.recv + self.request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_on_one_evd_share_completion_flags() {
        let mut s = DtoStreams::default();
        s.attach(EvdFlags::DTO, Stream::Recv, CompletionFlags::UNSIGNALLED)
            .unwrap();
        assert!(s
            .attach(EvdFlags::DTO, Stream::Request, CompletionFlags::DEFAULT)
            .is_err());
        s.attach(EvdFlags::DTO, Stream::Request, CompletionFlags::UNSIGNALLED)
            .unwrap();
        s.detach(Stream::Recv);
        s.detach(Stream::Request);
        assert_eq!(s.users(), 0);
        s.attach(EvdFlags::DTO, Stream::Request, CompletionFlags::DEFAULT)
            .unwrap();
    }

    #[test]
    fn solicited_wait_evd_carries_nothing_else() {
        let mut s = DtoStreams::default();
        let sw = CompletionFlags::SOLICITED_WAIT;
        assert!(s
            .attach(EvdFlags::DTO | EvdFlags::CONNECTION, Stream::Recv, sw)
            .is_err());
        s.attach(EvdFlags::DTO, Stream::Recv, sw).unwrap();
        assert!(s.attach(EvdFlags::DTO, Stream::Request, sw).is_err());
    }
}
