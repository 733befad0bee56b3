//! [`Launch`]: this process's rank and world size as a launcher set them in the environment
//! (torchrun-style `RANK` / `WORLD_SIZE` / `LOCAL_RANK` / `LOCAL_WORLD_SIZE`, or Slurm's
//! `SLURM_PROCID` / `SLURM_NTASKS` / `SLURM_LOCALID`).

use crate::{Error, Result};

/// Where this process sits in a distributed run, read from the launcher's environment.
///
/// Global ranks are what loaderx shards by: a node's local devices are global ranks
/// `node * local_world + local_rank` (as torchrun and Slurm number them), never contiguous
/// slices of one rank's batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Global rank, below `world`.
    pub rank: u32,
    /// Number of processes in the run.
    pub world: u32,
    /// Rank within this node, when the launcher says.
    pub local_rank: Option<u32>,
}

impl Launch {
    /// Reads the process environment; see [`Launch::from_lookup`].
    ///
    /// # Errors
    /// As [`Launch::from_lookup`].
    pub fn from_env() -> Result<Launch> {
        Launch::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `get` (for tests and for launchers that pass them another way).
    /// torchrun's `RANK` and `WORLD_SIZE` come first, then Slurm's `SLURM_PROCID` and
    /// `SLURM_NTASKS`; where both are set they must agree, or be torchrun's run inside Slurm's
    /// (`srun` a task a node, each starting `torchrun`: `WORLD_SIZE` a multiple of
    /// `SLURM_NTASKS` above it, torchrun's ranks taken). With neither, the run is one process
    /// (rank 0 of 1).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the variables when one of a pair is set without the
    /// other, a value is not a number, a rank is not below its world size, the two launchers'
    /// variables disagree, or `LOCAL_RANK` is not below `LOCAL_WORLD_SIZE` or above `RANK`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Launch> {
        let num =
            |k: &str| -> Result<Option<u32>> {
                match get(k) {
                    None => Ok(None),
                    Some(v) if v.trim().is_empty() => Ok(None),
                    Some(v) => v.trim().parse::<u32>().map(Some).map_err(|_| {
                        Error::InvalidArgument(format!("{k}={v:?} is not a non-negative integer"))
                    }),
                }
            };
        let pair = |r: &str, w: &str| -> Result<Option<(u32, u32)>> {
            match (num(r)?, num(w)?) {
                (None, None) => Ok(None),
                (Some(rank), Some(world)) if world > 0 && rank < world => Ok(Some((rank, world))),
                (Some(rank), Some(world)) => {
                    Err(Error::InvalidArgument(format!("{r}={rank} is not below {w}={world}")))
                }
                (Some(_), None) => Err(Error::InvalidArgument(format!("{r} is set but {w} is not"))),
                (None, Some(_)) => Err(Error::InvalidArgument(format!("{w} is set but {r} is not"))),
            }
        };
        let torch = pair("RANK", "WORLD_SIZE")?;
        let slurm = pair("SLURM_PROCID", "SLURM_NTASKS")?;
        let (rank, world) = match (torch, slurm) {
            // torchrun started by srun, a task a node: Slurm counts the nodes, torchrun every
            // process (each node's a share of WORLD_SIZE), and torchrun's are the ranks (look 96,
            // finding 2: every such job was refused).
            (Some(t), Some(s)) if t.1 > s.1 && t.1 % s.1 == 0 => t,
            (Some(t), Some(s)) if t != s => {
                return Err(Error::InvalidArgument(format!(
                    "RANK={} WORLD_SIZE={} disagree with SLURM_PROCID={} SLURM_NTASKS={}",
                    t.0, t.1, s.0, s.1
                )));
            }
            (Some(t), _) => t,
            (None, Some(s)) => s,
            (None, None) => (0, 1),
        };
        let local_rank = match torch {
            Some(_) => num("LOCAL_RANK")?,
            None => num("SLURM_LOCALID")?.or(num("LOCAL_RANK")?),
        };
        if let (Some(l), Some(lw)) = (local_rank, num("LOCAL_WORLD_SIZE")?)
            && l >= lw
        {
            return Err(Error::InvalidArgument(format!("LOCAL_RANK={l} is not below LOCAL_WORLD_SIZE={lw}")));
        }
        if let Some(l) = local_rank
            && l > rank
        {
            return Err(Error::InvalidArgument(format!(
                "the local rank {l} is above the global rank {rank}: a global rank counts every \
                 earlier node's processes"
            )));
        }
        Ok(Launch { rank, world, local_rank })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Launch> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Launch::from_lookup(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn torchrun_slurm_and_a_single_process() {
        assert_eq!(launch(&[]).unwrap(), Launch { rank: 0, world: 1, local_rank: None });
        let t = launch(&[("RANK", "5"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "4")]);
        assert_eq!(t.unwrap(), Launch { rank: 5, world: 8, local_rank: Some(1) });
        let s = launch(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4"), ("SLURM_LOCALID", "1")]);
        assert_eq!(s.unwrap(), Launch { rank: 3, world: 4, local_rank: Some(1) });
        let both =
            launch(&[("RANK", "3"), ("WORLD_SIZE", "4"), ("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]);
        assert_eq!(both.unwrap().rank, 3, "agreeing launchers");
        // srun, a task a node on 2 nodes, each starting torchrun of 8 processes (look 96,
        // finding 2: refused as disagreeing).
        let nested = launch(&[
            ("RANK", "13"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_RANK", "5"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_LOCALID", "0"),
        ]);
        assert_eq!(nested.unwrap(), Launch { rank: 13, world: 16, local_rank: Some(5) });
    }

    #[test]
    fn inconsistent_variables_are_errors_naming_them() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("RANK", "1")], "WORLD_SIZE is not"),
            (&[("WORLD_SIZE", "2")], "WORLD_SIZE is set but RANK is not"),
            (&[("RANK", "2"), ("WORLD_SIZE", "2")], "RANK=2 is not below WORLD_SIZE=2"),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")], "not below WORLD_SIZE=0"),
            (&[("RANK", "x"), ("WORLD_SIZE", "2")], "RANK=\"x\""),
            (&[("RANK", "-1"), ("WORLD_SIZE", "2")], "RANK=\"-1\""),
            (&[("RANK", "1"), ("WORLD_SIZE", "4"), ("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4")], "disagree"),
            // Fewer torchrun processes than Slurm tasks, or not a whole share each: stale.
            (&[("RANK", "1"), ("WORLD_SIZE", "2"), ("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4")], "disagree"),
            (&[("RANK", "1"), ("WORLD_SIZE", "6"), ("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4")], "disagree"),
            (&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")], "SLURM_PROCID=4"),
            (
                &[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "2")],
                "LOCAL_RANK=2",
            ),
            (&[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "3")], "local rank 3 is above"),
        ];
        for (vars, want) in cases {
            match launch(vars) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains(want), "{vars:?}: {m}"),
                other => panic!("{vars:?}: {other:?}"),
            }
        }
    }
}
