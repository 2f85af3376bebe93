! A 1-D heat-diffusion rod in Fortran, monitored and steered through gyr's C ABI.
!
!   gyr gen --lang fortran heat.toml -o heat_sensors.f90
!   gfortran -O2 ../../crates/gyr-ffi/fortran/gyr.f90 heat_sensors.f90 heat.f90 \
!     -L ../../target/release -lgyr_ffi -o heat
!   LD_LIBRARY_PATH=../../target/release GYR_TRACE=heat.gyr ./heat
!
! Steer it as the C example: gyr set PID heat.alpha 0.4, gyr call PID heat.reset 300,
! gyr call PID energy, gyr call PID heat.stop.
module heat_state
  use iso_c_binding
  implicit none
  integer, parameter :: cells = 64
  real(c_double) :: rod(cells)
  real(c_double), target :: alpha = 0.1d0
  integer(c_int64_t), target :: step = 0
  logical(c_bool), target :: heater = .true.
  logical :: running = .true.
  real(c_double), volatile :: last_energy = 0

contains

  function reset(user_data, args, nargs, result) bind(C) result(rc)
    use gyr_sensors, only: emit_heat_note
    type(c_ptr), value :: user_data
    type(c_ptr), value :: args
    integer(c_size_t), value :: nargs
    real(c_double), intent(out) :: result
    integer(c_int32_t) :: rc
    real(c_double), pointer :: a(:)
    rc = 1
    result = 0
    if (nargs /= 1) return
    call c_f_pointer(args, a, [nargs])
    if (a(1) < 0) return
    rod = a(1)
    result = a(1)
    call emit_heat_note("reset")
    rc = 0
  end function reset

  function stop(user_data, args, nargs, result) bind(C) result(rc)
    type(c_ptr), value :: user_data
    type(c_ptr), value :: args
    integer(c_size_t), value :: nargs
    real(c_double), intent(out) :: result
    integer(c_int32_t) :: rc
    running = .false.
    result = real(step, c_double)
    rc = 0
  end function stop

  ! Called on gyr's steering thread: reads a value the loop stores whole.
  function energy(user_data, args, nargs, result) bind(C) result(rc)
    type(c_ptr), value :: user_data
    type(c_ptr), value :: args
    integer(c_size_t), value :: nargs
    real(c_double), intent(out) :: result
    integer(c_int32_t) :: rc
    result = last_energy
    rc = 0
  end function energy
end module heat_state

program heat
  use iso_c_binding
  use ieee_arithmetic, only: ieee_value, ieee_quiet_nan
  use gyr
  use gyr_sensors
  use heat_state
  implicit none
  interface
    function usleep(us) bind(C, name="usleep") result(rc)
      import :: c_int32_t
      integer(c_int32_t), value :: us
      integer(c_int32_t) :: rc
    end function usleep
  end interface
  type(c_ptr) :: obj, hottest
  real(c_double) :: next(cells), e, none
  integer(c_int64_t) :: steps = 0
  character(len=32) :: arg
  integer :: i

  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if
  call check(gyr_thread_name("rod"), "gyr_thread_name")  ! its row in gyr's views
  call check(gyr_init(), "gyr_init")
  call check(gyr_sensors_init(), "gyr_sensors_init")
  hottest = gyr_sample_double("heat.max" // c_null_char, 0d0)

  none = ieee_value(none, ieee_quiet_nan)
  obj = gyr_object("heat", "a 1-D heat-diffusion rod (Fortran)")
  call check(gyr_attr_double(obj, "alpha", alpha, "1", 0d0, 0.5d0, 0), "alpha")
  call check(gyr_attr_int64(obj, "step", step, "", none, none, GYR_READ_ONLY), "step")
  call check(gyr_attr_bool(obj, "heater", heater, 0), "heater")
  call check(gyr_actuator(obj, "reset", "temperature: float", reset), "reset")
  call check(gyr_actuator(obj, "stop", "", stop), "stop")
  call check(gyr_function("energy", "", energy), "energy")

  rod = 300d0
  call emit_heat_note("started")
  do while (running .and. (steps == 0 .or. step < steps))
    if (heater) rod(1) = 400d0
    do i = 1, cells
      next(i) = rod(i) + alpha * (rod(max(i - 1, 1)) - 2 * rod(i) + rod(min(i + 1, cells)))
    end do
    rod = next
    e = sum(rod)
    step = step + 1
    last_energy = e
    call emit_heat_step(step, e, alpha)
    call gyr_sample_set(hottest, maxval(rod))
    call check(gyr_sync("step"), "gyr_sync_point")
    i = usleep(2000)
  end do
  call emit_heat_note("stopped")
  print '(a, i0, a, g0, a, g0)', "heat: ", step, " steps, alpha ", alpha, ", energy ", last_energy
  call check(gyr_shutdown(), "gyr_shutdown")

contains

  subroutine check(rc, what)
    integer(c_int32_t), intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc /= GYR_OK) write (0, '(a)') "heat: " // what // ": " // gyr_error()
  end subroutine check
end program heat
