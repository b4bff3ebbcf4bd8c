//! Writes frames to a classic pcap file (Ethernet link type), like ibdump on a port, with
//! timestamps from the virtual clock.

use crate::time::Instant;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// A pcap file being written.
pub struct PcapCapture<W: Write> {
    writer: PcapWriter<W>,
    frames: u64,
}

/// Errors writing a capture.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("capture I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("pcap: {0}")]
    Pcap(#[from] pcap_file::PcapError),
}

impl PcapCapture<BufWriter<File>> {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<Self, CaptureError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapCapture<W> {
    /// A capture writing to `w`.
    pub fn new(w: W) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            snaplen: 65535,
            endianness: pcap_file::Endianness::Little,
            ..PcapHeader::default()
        };
        Ok(PcapCapture {
            writer: PcapWriter::with_header(w, header)?,
            frames: 0,
        })
    }

    /// Appends one frame seen at `at`.
    pub fn write(&mut self, at: Instant, frame: &[u8]) -> Result<(), CaptureError> {
        let ts = Duration::from_nanos(at.as_nanos());
        let pkt = PcapPacket::new(ts, frame.len() as u32, frame);
        self.writer.write_packet(&pkt)?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = self.writer.into_writer();
        w.flush()?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::PcapReader;

    #[test]
    fn round_trips_through_a_pcap_reader() {
        let mut cap = PcapCapture::new(Vec::new()).unwrap();
        cap.write(Instant::from_nanos(1_500_000_000), &[1, 2, 3])
            .unwrap();
        cap.write(Instant::from_nanos(1_500_001_000), &[4; 60])
            .unwrap();
        assert_eq!(cap.frames(), 2);
        let bytes = cap.finish().unwrap();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header().datalink, DataLink::ETHERNET);
        let p1 = r.next_packet().unwrap().unwrap();
        assert_eq!(&p1.data[..], &[1, 2, 3]);
        assert_eq!(p1.timestamp, Duration::from_nanos(1_500_000_000));
        let p2 = r.next_packet().unwrap().unwrap();
        assert_eq!(p2.data.len(), 60);
        assert!(r.next_packet().is_none());
    }
}
