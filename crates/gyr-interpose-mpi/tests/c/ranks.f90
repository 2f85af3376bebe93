! A Fortran MPI program for the interposer's tests (tests/mpi.rs), run with 4 ranks: a ring of
! blocking and nonblocking messages, a wildcard receive, Sendrecv, collectives, and a split and
! a duplicated communicator, through mpif.h.
program ranks
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, size, right, left, i, half, dup, hr
  integer :: reqs(2), st(MPI_STATUS_SIZE)
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

  call MPI_FINALIZE(ierr)
end program ranks
