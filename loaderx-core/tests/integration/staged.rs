//! Staged loaders (`LoaderBuilder::build_staged`): steps gathered straight into the slots of a
//! `SlotRing` and handed to a stage function with a fence, here a simulated device: a thread
//! that "copies" the slot and completes the fence a little later. Same batches as the plain
//! loader, in order and on resume; back-pressure bounded by the ring; failures and a closed
//! ring as errors without a leaked slot.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loaderx_core::staging::{Fence, SlotRing, Staged};
use loaderx_core::{DataLoader, DenseSource, Error, LoaderBuilder};

/// Completed by the simulated device after its copy.
struct Done(Arc<AtomicBool>);

impl Fence for Done {
    fn is_done(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    fn wait(&self) {
        while !self.is_done() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn builder() -> LoaderBuilder {
    let x =
        DenseSource::from_vec(vec![3], (0..3 * 500).map(|v| v as f32 * 0.5).collect::<Vec<f32>>()).unwrap();
    let y = DenseSource::from_vec(vec![], (0..500).map(|v| (v % 256) as u8).collect::<Vec<u8>>()).unwrap();
    DataLoader::builder().stream("x", x).stream("y", y).batch_size(16).seed(5).threads(3).prefetch(2)
}

type Copied = (u64, Vec<(String, Vec<usize>, Vec<u8>)>);
type Staging = Result<(Copied, Box<dyn Fence>), loaderx_core::BoxError>;

/// The "device": the slot's bytes copied out (what a DMA would read), the fence completed
/// `delay` later; counts the slots in use at once.
fn device(
    delay: Duration,
    busy: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> impl Fn(Staged<'_, Vec<Vec<u8>>>) -> Staging + Send + Sync {
    move |s| {
        let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        let copied: Vec<_> = s
            .streams
            .iter()
            .enumerate()
            .map(|(k, m)| (m.name.clone(), m.shape.clone(), s.slot[k].clone()))
            .collect();
        let flag = Arc::new(AtomicBool::new(false));
        let (f, b) = (Arc::clone(&flag), Arc::clone(&busy));
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            b.fetch_sub(1, Ordering::SeqCst);
            f.store(true, Ordering::Release);
        });
        Ok(((s.step, copied), Box::new(Done(flag)) as Box<dyn Fence>))
    }
}

fn plain(b: LoaderBuilder, steps: usize) -> Vec<Copied> {
    let mut l = b.build().unwrap();
    (0..steps)
        .map(|_| {
            let batch = l.next_batch().unwrap().unwrap();
            let mut streams: Vec<_> = ["x", "y"]
                .iter()
                .map(|n| {
                    let a = batch.get(n).unwrap();
                    (n.to_string(), a.shape().to_vec(), a.as_bytes().to_vec())
                })
                .collect();
            streams.sort();
            (batch.step(), streams)
        })
        .collect()
}

#[test]
fn staged_batches_are_the_plain_loaders_in_order_and_on_resume() {
    let (busy, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 4]));
    let mut staged = builder()
        .build_staged(
            Arc::clone(&ring),
            device(Duration::from_millis(2), Arc::clone(&busy), Arc::clone(&peak)),
        )
        .unwrap();
    let want = plain(builder(), 40);
    for w in want.iter().take(25) {
        let (step, mut got) = staged.next_batch().unwrap().unwrap();
        got.sort();
        assert_eq!(&(step, got), w, "step {step}");
    }
    assert!(peak.load(Ordering::SeqCst) <= 4, "never more slots in use than the ring holds");
    // Resume at step 25 from the staged loader's state.
    let state = staged.state();
    assert_eq!(state.step, 25);
    drop(staged);
    let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 4]));
    let mut resumed = builder().state(state).build_staged(ring, device(Duration::ZERO, busy, peak)).unwrap();
    for w in &want[25..] {
        let (step, mut got) = resumed.next_batch().unwrap().unwrap();
        got.sort();
        assert_eq!(&(step, got), w);
    }
}

/// A slow device and a ring of two slots: every prefetch thread waits its turn for a slot
/// (back-pressure), the batches are still right and in order.
#[test]
fn a_small_ring_applies_back_pressure() {
    let (busy, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 2]));
    let mut staged = builder()
        .threads(4)
        .build_staged(
            Arc::clone(&ring),
            device(Duration::from_millis(5), Arc::clone(&busy), Arc::clone(&peak)),
        )
        .unwrap();
    let want = plain(builder(), 20);
    for w in &want {
        let (step, mut got) = staged.next_batch().unwrap().unwrap();
        got.sort();
        assert_eq!(&(step, got), w);
    }
    assert!(peak.load(Ordering::SeqCst) <= 2, "peak {}", peak.load(Ordering::SeqCst));
    assert!(peak.load(Ordering::SeqCst) >= 1);
}

/// A failing stage is that step's error and its slot comes back; the next steps go on. A closed
/// ring stops the loader with an error, not a hang. Ragged streams are refused.
#[test]
fn failures_give_the_slot_back_and_a_closed_ring_stops_the_loader() {
    let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 3]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let mut staged = builder()
        .threads(1)
        .build_staged(Arc::clone(&ring), move |s: Staged<'_, Vec<Vec<u8>>>| {
            if s.step == 3 {
                return Err("the device is full".into());
            }
            s2.lock().unwrap().push(s.step);
            Ok((s.step, Box::new(Done(Arc::new(AtomicBool::new(true)))) as Box<dyn Fence>))
        })
        .unwrap();
    for step in 0..6u64 {
        match staged.next_batch() {
            Ok(got) => assert_eq!(got, Some(step)),
            Err(Error::Transform { step: 3, source }) => assert!(source.to_string().contains("full")),
            Err(e) => panic!("step {step}: {e}"),
        }
    }
    assert!(!seen.lock().unwrap().contains(&3));
    let (_, leased, _) = ring.counts();
    assert!(leased <= 1, "only a step being gathered holds a slot: {leased}");
    ring.close();
    let mut stopped = false;
    for _ in 0..12 {
        if let Err(Error::LoaderStopped(_)) = staged.next_batch() {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "a closed ring stops the steps after those already staged");
    drop(staged);
    assert_eq!(ring.drain().len(), 3, "every slot back");
    // Ragged streams are not staged.
    let r = loaderx_core::RaggedSource::from_records(vec![], &[vec![1u8], vec![2, 3]]).unwrap();
    let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 2]));
    let e = DataLoader::builder()
        .ragged_stream("t", r)
        .build_staged(ring, |s: Staged<'_, Vec<Vec<u8>>>| {
            Ok((s.step, Box::new(Done(Arc::new(AtomicBool::new(true)))) as Box<dyn Fence>))
        })
        .unwrap_err();
    assert!(matches!(e, Error::Config { what: "staged", reason: m } if m.contains("ragged")));
    // Nor are streams of encoded images (twenty-sixth look, V7).
    #[cfg(feature = "images")]
    {
        let r = loaderx_core::RaggedSource::from_records(vec![], &[vec![1u8], vec![2, 3]]).unwrap();
        let ring = Arc::new(SlotRing::new(vec![Vec::<Vec<u8>>::new(); 2]));
        let e = DataLoader::builder()
            .image_stream("image", r, loaderx_core::vision::ImagePipeline::eval(8))
            .build_staged(ring, |s: Staged<'_, Vec<Vec<u8>>>| {
                Ok((s.step, Box::new(Done(Arc::new(AtomicBool::new(true)))) as Box<dyn Fence>))
            })
            .unwrap_err();
        assert!(
            matches!(&e, Error::Config { what: "staged", reason: m } if m.contains("\"image\"") && m.contains("encoded images")),
            "{e}"
        );
    }
}
