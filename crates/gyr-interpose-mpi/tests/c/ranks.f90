! A Fortran MPI program for the interposer's tests (tests/mpi.rs), run with 4 ranks: a ring of
! blocking and nonblocking messages, a wildcard receive, Sendrecv, collectives (with counts per
! rank, in place, nonblocking), a synchronous send completed by polling, persistent requests,
! a probe, and a split, a duplicated and a Cartesian communicator, through mpif.h.
program ranks
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, size, right, left, i, half, dup, hr
  integer :: reqs(2), st(MPI_STATUS_SIZE), preqs(2), idxs(2), counts(4), displs(4)
  integer :: idx, outcount, done, cart, dims(2)
  logical :: flag, periods(2)
  double precision :: a(8), b(8), c(32), d(32)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)
  a = rank

  if (mod(rank, 2) == 0) then
    call MPI_SEND(a, 8, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, ierr)
    call MPI_RECV(b, 8, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, st, ierr)
  else
    call MPI_RECV(b, 8, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_SEND(a, 8, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, ierr)
  end if

  call MPI_IRECV(b, 4, MPI_DOUBLE_PRECISION, left, 2, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(a, 4, MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)

  if (rank == 0) then
    do i = 1, size - 1
      call MPI_IRECV(b, 8, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &
                     reqs(1), ierr)
      call MPI_WAIT(reqs(1), st, ierr)
    end do
  else
    call MPI_SEND(a, rank, MPI_DOUBLE_PRECISION, 0, 10 + rank, MPI_COMM_WORLD, ierr)
  end if
  ! No later message may reach rank 0's any-tag receives.
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)

  call MPI_SENDRECV(a, 3, MPI_DOUBLE_PRECISION, left, 3, b, 3, MPI_DOUBLE_PRECISION, right, 3, &
                    MPI_COMM_WORLD, st, ierr)

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_BCAST(a, 8, MPI_DOUBLE_PRECISION, 2, MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(a, b, 8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_REDUCE(a, b, 8, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call MPI_ALLTOALL(c, 2, MPI_DOUBLE_PRECISION, d, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)

  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_COMM_RANK(half, hr, ierr)
  if (hr == 0) then
    call MPI_SEND(a, 2, MPI_DOUBLE_PRECISION, 1, 4, half, ierr)
  else if (hr == 1) then
    call MPI_RECV(b, 2, MPI_DOUBLE_PRECISION, 0, 4, half, st, ierr)
  end if
  call MPI_COMM_DUP(half, dup, ierr)
  call MPI_BARRIER(dup, ierr)
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_FREE(half, ierr)

  ! Collectives with counts per rank, in place, scans, and nonblocking ones.
  do i = 1, 4
    counts(i) = 2
    displs(i) = 2 * (i - 1)
  end do
  call MPI_GATHER(a, 2, MPI_DOUBLE_PRECISION, c, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call MPI_SCATTER(c, 2, MPI_DOUBLE_PRECISION, a, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, &
                   ierr)
  call MPI_ALLGATHER(a, 2, MPI_DOUBLE_PRECISION, c, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call MPI_GATHERV(a, 2, MPI_DOUBLE_PRECISION, c, counts, displs, MPI_DOUBLE_PRECISION, 1, &
                   MPI_COMM_WORLD, ierr)
  call MPI_ALLGATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c, counts, displs, &
                      MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call MPI_ALLTOALLV(c, counts, displs, MPI_DOUBLE_PRECISION, d, counts, displs, &
                     MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call MPI_SCAN(a, b, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_REDUCE_SCATTER_BLOCK(c, b, 2, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_IBARRIER(MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_WAIT(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_IALLREDUCE(a, b, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_WAITANY(1, reqs, idx, st, ierr)
  call MPI_IGATHERV(a, 2, MPI_DOUBLE_PRECISION, c, counts, displs, MPI_DOUBLE_PRECISION, 0, &
                    MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISCAN(a, b, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)

  ! A synchronous nonblocking send completed by polling, its receive after a probe.
  if (rank == 0) then
    call MPI_ISSEND(a, 5, MPI_DOUBLE_PRECISION, 1, 20, MPI_COMM_WORLD, reqs(1), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_TEST(reqs(1), flag, st, ierr)
    end do
  else if (rank == 1) then
    call MPI_PROBE(0, 20, MPI_COMM_WORLD, st, ierr)
    call MPI_RECV(b, 5, MPI_DOUBLE_PRECISION, 0, 20, MPI_COMM_WORLD, st, ierr)
  end if

  ! Persistent requests around the ring, started twice, completed as they come.
  call MPI_SEND_INIT(a, 6, MPI_DOUBLE_PRECISION, right, 21, MPI_COMM_WORLD, preqs(1), ierr)
  call MPI_RECV_INIT(b, 6, MPI_DOUBLE_PRECISION, left, 21, MPI_COMM_WORLD, preqs(2), ierr)
  do i = 1, 2
    call MPI_STARTALL(2, preqs, ierr)
    done = 0
    do while (done < 2)
      call MPI_WAITSOME(2, preqs, outcount, idxs, MPI_STATUSES_IGNORE, ierr)
      done = done + outcount
    end do
  end do
  call MPI_REQUEST_FREE(preqs(1), ierr)
  call MPI_REQUEST_FREE(preqs(2), ierr)
  call MPI_SENDRECV_REPLACE(a, 2, MPI_DOUBLE_PRECISION, right, 22, left, 22, MPI_COMM_WORLD, &
                            st, ierr)

  ! A periodic 2 x 2 grid.
  dims(1) = 2
  dims(2) = 2
  periods(1) = .true.
  periods(2) = .true.
  call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call MPI_BARRIER(cart, ierr)
  call MPI_COMM_FREE(cart, ierr)

  call MPI_FINALIZE(ierr)
end program ranks
