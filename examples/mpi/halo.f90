! Halo exchange in Fortran (the `mpi` module): boundary cells traded with both neighbours of a
! ring (mpi_sendrecv), computation, and a residual agreed every 10 steps (mpi_allreduce).
! Usage: halo_f [STEPS] [HALO_DOUBLES].
program halo
  use mpi
  implicit none
  integer :: ierr, rank, nranks, left, right, s, steps, n, i
  double precision, allocatable :: out(:), in(:)
  double precision :: x, residual, local
  character(len=32) :: arg
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, nranks, ierr)
  steps = 200
  n = 1024
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) n
  end if
  allocate (out(n), in(n))
  out = rank
  left = mod(rank + nranks - 1, nranks)
  right = mod(rank + 1, nranks)
  x = rank
  residual = 0
  do s = 1, steps
    call mpi_sendrecv(out, n, MPI_DOUBLE_PRECISION, right, 1, in, n, MPI_DOUBLE_PRECISION, left, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call mpi_sendrecv(out, n, MPI_DOUBLE_PRECISION, left, 2, in, n, MPI_DOUBLE_PRECISION, right, 2, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    do i = 1, 200000
      x = x*1.0000001d0 + 1d-9
    end do
    if (mod(s, 10) == 0) then
      local = x
      call mpi_allreduce(local, residual, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
  end do
  if (rank == 0) print '(a,i0,a,i0,a,es12.4)', 'halo_f: ', steps, ' steps on ', nranks, ' ranks, residual ', residual
  deallocate (out, in)
  call mpi_finalize(ierr)
end program halo
