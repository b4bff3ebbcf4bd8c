//! Writes frames to a classic pcap file (Ethernet link type), like ibdump on a port, with
//! timestamps from the virtual clock.

use crate::time::Instant;
use byteorder_slice::LittleEndian;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use pcap_file::DataLink;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// A pcap file being written. The capture owns its writer so that [`flush`](Self::flush) can
/// push what it holds to the file at any time: an engine flushes after every turn that wrote,
/// so the file is complete up to the last turn however the process ends (a kill included).
///
/// Each record (its 16-byte header and its frame) reaches the writer in one `write_all`, so a
/// `BufWriter` never hands the file half a record when its buffer fills. Only SIGKILL during a
/// flush can leave part of a record: the kernel ends a write for a fatal signal between two
/// pages. Everything before it is whole.
pub struct PcapCapture<W: Write> {
    writer: W,
    header: PcapHeader,
    frames: u64,
    unflushed: bool,
    /// The record being written, reused from frame to frame.
    record: Vec<u8>,
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
    pub fn new(mut writer: W) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            snaplen: 65535,
            endianness: pcap_file::Endianness::Little,
            ..PcapHeader::default()
        };
        header.write_to(&mut writer)?;
        Ok(PcapCapture {
            writer,
            header,
            frames: 0,
            unflushed: true,
            record: Vec::new(),
        })
    }

    /// Appends one frame seen at `at`.
    pub fn write(&mut self, at: Instant, frame: &[u8]) -> Result<(), CaptureError> {
        let ts = Duration::from_nanos(at.as_nanos());
        let pkt = PcapPacket::new(ts, frame.len() as u32, frame);
        self.record.clear();
        pkt.write_to::<_, LittleEndian>(
            &mut self.record,
            self.header.ts_resolution,
            self.header.snaplen,
        )?;
        self.writer.write_all(&self.record)?;
        self.frames += 1;
        self.unflushed = true;
        Ok(())
    }

    /// Pushes the frames written since the last flush to the file (nothing when there are
    /// none).
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        if self.unflushed {
            self.writer.flush()?;
            self.unflushed = false;
        }
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> Result<W, CaptureError> {
        self.writer.flush()?;
        Ok(self.writer)
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

    /// A file that remembers where each write it was handed ended.
    #[derive(Debug, Default)]
    struct WriteEnds {
        bytes: Vec<u8>,
        ends: Vec<usize>,
    }

    impl Write for WriteEnds {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes.extend_from_slice(buf);
            self.ends.push(self.bytes.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_reaching_the_file_ends_on_a_record_boundary() {
        // A 1 KiB buffer fills mid-frame often: frames of 60..1500 bytes, and one larger than
        // the buffer, which BufWriter hands straight to the file.
        let mut cap =
            PcapCapture::new(BufWriter::with_capacity(1024, WriteEnds::default())).unwrap();
        let sizes: Vec<usize> = (0..200)
            .map(|i| 60 + (i * 379) % 1441)
            .chain([4000])
            .collect();
        for (i, &n) in sizes.iter().enumerate() {
            cap.write(Instant::from_nanos(i as u64), &vec![i as u8; n])
                .unwrap();
        }
        let file = cap.finish().unwrap().into_inner().unwrap();
        let mut boundaries = vec![24usize];
        for &n in &sizes {
            boundaries.push(boundaries.last().unwrap() + 16 + n);
        }
        assert!(file.ends.len() > 20, "the buffer filled many times");
        for end in &file.ends {
            assert!(
                boundaries.contains(end),
                "a write ended at byte {end}, inside a record"
            );
        }
        let mut r = PcapReader::new(&file.bytes[..]).unwrap();
        for &n in &sizes {
            assert_eq!(r.next_packet().unwrap().unwrap().data.len(), n);
        }
        assert!(r.next_packet().is_none());
    }

    #[test]
    fn a_flushed_capture_is_readable_while_it_stays_open() {
        let dir = std::env::temp_dir().join(format!("capture-flush-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("open.pcap");
        let mut cap = PcapCapture::create(&path).unwrap();
        cap.write(Instant::from_nanos(7), &[9; 64]).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            0,
            "buffered until flushed"
        );
        cap.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.next_packet().unwrap().unwrap().data.len(), 64);
        // The process may end here without `finish`: the file already holds the frame.
        std::mem::forget(cap);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
