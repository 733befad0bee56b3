//! [`Chosen`]: the order a loader's builder chose (the endless sampler, a pass, a mixture,
//! packing or bucketing: one of them), and why each stands alone.

use super::bucket::BucketConfig;
use super::pack::Pack;
use super::state::Pass;

/// The order a builder's setters chose: the endless sampler unless one of [`LoaderBuilder::pass`],
/// [`mixture`](LoaderBuilder::mixture), [`pack`](LoaderBuilder::pack) or
/// [`bucket`](LoaderBuilder::bucket) was called (a second of another kind is refused).
#[derive(Debug, Clone, Default)]
pub(super) enum Chosen {
    /// The endless sampler.
    #[default]
    Endless,
    /// One finite pass.
    Pass(Pass),
    /// A weighted mixture: the weights and the sources' lengths.
    Mixture { weights: Vec<f64>, lens: Vec<u32> },
    /// The packed stream's name and its packing.
    Pack(String, Pack),
    /// Length bucketing.
    Bucket(BucketConfig),
}

impl Chosen {
    /// The setter that chose this order (none for the endless default).
    pub(super) fn setter(&self) -> Option<&'static str> {
        match self {
            Chosen::Endless => None,
            Chosen::Pass(_) => Some("pass"),
            Chosen::Mixture { .. } => Some("mixture"),
            Chosen::Pack(..) => Some("pack"),
            Chosen::Bucket(_) => Some("bucket"),
        }
    }

    /// The mixture's sources' lengths.
    pub(super) fn mixture_lens(&self) -> Option<&Vec<u32>> {
        match self {
            Chosen::Mixture { lens, .. } => Some(lens),
            _ => None,
        }
    }

    /// The mixture's weights.
    pub(super) fn mixture_weights(&self) -> Option<&Vec<f64>> {
        match self {
            Chosen::Mixture { weights, .. } => Some(weights),
            _ => None,
        }
    }

    /// The packing.
    pub(super) fn pack(&self) -> Option<Pack> {
        match self {
            Chosen::Pack(_, p) => Some(*p),
            _ => None,
        }
    }

    /// The bucketing.
    pub(super) fn bucket(&self) -> Option<&BucketConfig> {
        match self {
            Chosen::Bucket(b) => Some(b),
            _ => None,
        }
    }
}

/// Why length bucketing stands alone.
pub(super) const BUCKET_ENDLESS: &str =
    "length bucketing serves the endless sampler's batches: not with a finite pass, a mixture or packing";
/// Why a packed stream stands alone.
pub(super) const PACKED_ALONE: &str = "a packed stream is the loader's only stream, endless and not mixed";
/// Why a mixture is endless and unselected.
pub(super) const MIXTURE_WHOLE: &str = "a mixture is endless and reads its sources whole: select within the sources, and \
                             evaluate each source with its own finite loader";
