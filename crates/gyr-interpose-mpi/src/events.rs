//! The MPI events, as sensors: what the wrappers record besides `gyr::msg`'s message events.
//!
//! Each is an event type like any other (`gyr sensors off gyr.mpi.begin` switches one off). The
//! table is in the crate doc.

/// An MPI call begins.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.begin")]
pub struct MpiBegin {
    /// The call's name, as the C binding spells it (`MPI_Send`; Fortran's `mpi_send_` too).
    pub call: &'static str,
}

/// An MPI call returned.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.end")]
pub struct MpiEnd {
    /// The call's name.
    pub call: &'static str,
    /// What it returned (a Fortran call: its `ierr`); 0 is `MPI_SUCCESS`.
    pub ret: i32,
}

/// A request was posted (a nonblocking call) or a persistent one started.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.request")]
pub struct MpiRequest {
    /// The request's id, unique in this process (a persistent request keeps it over starts).
    pub request: u64,
    /// The call that posted or started it (`MPI_Irecv`, `MPI_Start`, ...).
    pub call: &'static str,
    /// Whether it receives (else it sends).
    pub recv: bool,
    /// The peer as a world rank; -1: any source; -2: `MPI_PROC_NULL`.
    pub peer: i32,
    /// The tag asked for; -1: any tag.
    pub tag: i32,
    /// The bytes sent, or the receive buffer's bytes.
    pub bytes: u64,
    /// The communicator's id.
    pub comm: u64,
}

/// A request completed (in a `Wait*` or a successful `Test*`).
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.complete")]
pub struct MpiComplete {
    /// The request's id.
    pub request: u64,
    /// Whether it was cancelled rather than matched.
    pub cancelled: bool,
}

/// This rank took part in a collective.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.collective")]
pub struct MpiCollective {
    /// The call's name.
    pub call: &'static str,
    /// The communicator's id.
    pub comm: u64,
    /// The root as a world rank; -1: the collective has none.
    pub root: i32,
    /// Bytes this rank contributes.
    pub sent: u64,
    /// Bytes this rank receives.
    pub received: u64,
}

/// A communicator was created, and this rank belongs to it.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.comm")]
pub struct MpiComm<'a> {
    /// The call that created it.
    pub call: &'static str,
    /// Its id, the same in every member.
    pub comm: u64,
    /// The id of the communicator it was created from.
    pub parent: u64,
    /// Its size.
    pub size: u32,
    /// Its members' world ranks in rank order, separated by commas (the first 4096 only,
    /// followed by `,...` when there are more).
    pub members: &'a str,
}

/// A communicator was freed.
#[derive(Debug, Clone, gyr::Sensor)]
#[sensor(name = "gyr.mpi.comm_free")]
pub struct MpiCommFree {
    /// Its id.
    pub comm: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr::Sensor;

    #[test]
    fn the_events_keep_their_names_and_fields() {
        let names = |f: Vec<gyr_core::Field>| f.into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(MpiBegin::NAME, "gyr.mpi.begin");
        assert_eq!(names(MpiEnd::fields()), ["call", "ret"]);
        assert_eq!(
            names(MpiRequest::fields()),
            ["request", "call", "recv", "peer", "tag", "bytes", "comm"]
        );
        assert_eq!(names(MpiComplete::fields()), ["request", "cancelled"]);
        assert_eq!(
            names(MpiCollective::fields()),
            ["call", "comm", "root", "sent", "received"]
        );
        assert_eq!(
            names(MpiComm::fields()),
            ["call", "comm", "parent", "size", "members"]
        );
        assert_eq!(MpiCommFree::NAME, "gyr.mpi.comm_free");
    }
}
