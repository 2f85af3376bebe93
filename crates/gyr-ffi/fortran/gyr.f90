! gyr's C ABI for Fortran (iso_c_binding): the declarations of include/gyr.h, plus wrappers that
! take Fortran strings. Compile it with the program: gfortran -c gyr.f90.
!
! Strings passed to the bind(C) interfaces must end in c_null_char; the wrappers gyr_object,
! gyr_attr_*, gyr_actuator, gyr_function, gyr_sync, gyr_msg_init, gyr_thread_name,
! gyr_thread_role and gyr_error add or remove it for you.
module gyr
  use iso_c_binding
  implicit none

  integer(c_int32_t), parameter :: GYR_OK = 0, GYR_E_NULL = 1, GYR_E_UTF8 = 2, &
       GYR_E_INVALID = 3, GYR_E_NOT_FOUND = 4, GYR_E_EXISTS = 5, GYR_E_RUNTIME = 6, &
       GYR_E_INTERNAL = 7
  integer(c_int32_t), parameter :: GYR_READ_ONLY = 1

  abstract interface
    ! An actuator's or function's body (gyr_callback).
    function gyr_callback(user_data, args, nargs, result) bind(C) result(rc)
      import :: c_ptr, c_double, c_size_t, c_int32_t
      type(c_ptr), value :: user_data
      type(c_ptr), value :: args
      integer(c_size_t), value :: nargs
      real(c_double), intent(out) :: result
      integer(c_int32_t) :: rc
    end function gyr_callback
  end interface

  interface
    function gyr_init() bind(C, name="gyr_init") result(rc)
      import :: c_int32_t
      integer(c_int32_t) :: rc
    end function gyr_init

    function gyr_shutdown() bind(C, name="gyr_shutdown") result(rc)
      import :: c_int32_t
      integer(c_int32_t) :: rc
    end function gyr_shutdown

    function gyr_flush() bind(C, name="gyr_flush") result(rc)
      import :: c_int32_t
      integer(c_int32_t) :: rc
    end function gyr_flush

    function gyr_last_error() bind(C, name="gyr_last_error") result(p)
      import :: c_ptr
      type(c_ptr) :: p
    end function gyr_last_error

    function gyr_spec_load(path) bind(C, name="gyr_spec_load") result(rc)
      import :: c_char, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: path
      integer(c_int32_t) :: rc
    end function gyr_spec_load

    function gyr_spec_register(toml) bind(C, name="gyr_spec_register") result(rc)
      import :: c_char, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: toml
      integer(c_int32_t) :: rc
    end function gyr_spec_register

    function gyr_sensor_find(name) bind(C, name="gyr_sensor_find") result(h)
      import :: c_char, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr) :: h
    end function gyr_sensor_find

    function gyr_emit(sensor, payload, len) bind(C, name="gyr_emit") result(rc)
      import :: c_ptr, c_size_t, c_int32_t
      type(c_ptr), value :: sensor
      type(c_ptr), value :: payload
      integer(c_size_t), value :: len
      integer(c_int32_t) :: rc
    end function gyr_emit

    function gyr_sensor_on(sensor) bind(C, name="gyr_sensor_on") result(on)
      import :: c_ptr, c_bool
      type(c_ptr), value :: sensor
      logical(c_bool) :: on
    end function gyr_sensor_on

    function gyr_sensor_enable(name, on) bind(C, name="gyr_sensor_enable") result(rc)
      import :: c_char, c_bool, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: name
      logical(c_bool), value :: on
      integer(c_int32_t) :: rc
    end function gyr_sensor_enable

    function gyr_sample_double(name, initial) bind(C, name="gyr_sample_double") result(h)
      import :: c_char, c_double, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      real(c_double), value :: initial
      type(c_ptr) :: h
    end function gyr_sample_double

    function gyr_sample_int64(name, initial) bind(C, name="gyr_sample_int64") result(h)
      import :: c_char, c_int64_t, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int64_t), value :: initial
      type(c_ptr) :: h
    end function gyr_sample_int64

    subroutine gyr_sample_set(cell, v) bind(C, name="gyr_sample_set")
      import :: c_ptr, c_double
      type(c_ptr), value :: cell
      real(c_double), value :: v
    end subroutine gyr_sample_set

    function gyr_aggregate_new(name, every) bind(C, name="gyr_aggregate_new") result(h)
      import :: c_char, c_int64_t, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int64_t), value :: every
      type(c_ptr) :: h
    end function gyr_aggregate_new

    subroutine gyr_aggregate_observe(agg, v) bind(C, name="gyr_aggregate_observe")
      import :: c_ptr, c_double
      type(c_ptr), value :: agg
      real(c_double), value :: v
    end subroutine gyr_aggregate_observe

    subroutine gyr_aggregate_free(agg) bind(C, name="gyr_aggregate_free")
      import :: c_ptr
      type(c_ptr), value :: agg
    end subroutine gyr_aggregate_free

    function gyr_object_new_c(name, description) bind(C, name="gyr_object_new") result(h)
      import :: c_char, c_ptr
      character(kind=c_char), dimension(*), intent(in) :: name, description
      type(c_ptr) :: h
    end function gyr_object_new_c

    function gyr_attr_double_c(obj, name, var, unit, min, max, flags) &
         bind(C, name="gyr_attr_double") result(rc)
      import :: c_ptr, c_char, c_double, c_int32_t
      type(c_ptr), value :: obj
      character(kind=c_char), dimension(*), intent(in) :: name, unit
      type(c_ptr), value :: var
      real(c_double), value :: min, max
      integer(c_int32_t), value :: flags
      integer(c_int32_t) :: rc
    end function gyr_attr_double_c

    function gyr_attr_int64_c(obj, name, var, unit, min, max, flags) &
         bind(C, name="gyr_attr_int64") result(rc)
      import :: c_ptr, c_char, c_double, c_int32_t
      type(c_ptr), value :: obj
      character(kind=c_char), dimension(*), intent(in) :: name, unit
      type(c_ptr), value :: var
      real(c_double), value :: min, max
      integer(c_int32_t), value :: flags
      integer(c_int32_t) :: rc
    end function gyr_attr_int64_c

    function gyr_attr_bool_c(obj, name, var, flags) bind(C, name="gyr_attr_bool") result(rc)
      import :: c_ptr, c_char, c_int32_t
      type(c_ptr), value :: obj
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr), value :: var
      integer(c_int32_t), value :: flags
      integer(c_int32_t) :: rc
    end function gyr_attr_bool_c

    function gyr_actuator_c(obj, name, params, callback, user_data) &
         bind(C, name="gyr_actuator") result(rc)
      import :: c_ptr, c_char, c_funptr, c_int32_t
      type(c_ptr), value :: obj
      character(kind=c_char), dimension(*), intent(in) :: name, params
      type(c_funptr), value :: callback
      type(c_ptr), value :: user_data
      integer(c_int32_t) :: rc
    end function gyr_actuator_c

    function gyr_function_c(name, params, callback, user_data) &
         bind(C, name="gyr_function") result(rc)
      import :: c_ptr, c_char, c_funptr, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: name, params
      type(c_funptr), value :: callback
      type(c_ptr), value :: user_data
      integer(c_int32_t) :: rc
    end function gyr_function_c

    function gyr_sync_point_c(name) bind(C, name="gyr_sync_point") result(rc)
      import :: c_char, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int32_t) :: rc
    end function gyr_sync_point_c

    function gyr_msg_init_c(job, rank, size) bind(C, name="gyr_msg_init") result(rc)
      import :: c_char, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: job
      integer(c_int32_t), value :: rank, size
      integer(c_int32_t) :: rc
    end function gyr_msg_init_c

    function gyr_thread_set_name_c(name) bind(C, name="gyr_thread_set_name") result(rc)
      import :: c_char, c_int32_t
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int32_t) :: rc
    end function gyr_thread_set_name_c

    function gyr_thread_set_role_c(role, index) bind(C, name="gyr_thread_set_role") result(rc)
      import :: c_char, c_int32_t, c_int64_t
      character(kind=c_char), dimension(*), intent(in) :: role
      integer(c_int64_t), value :: index
      integer(c_int32_t) :: rc
    end function gyr_thread_set_role_c

    subroutine gyr_msg_send(peer, tag, bytes, comm) bind(C, name="gyr_msg_send")
      import :: c_int32_t, c_int64_t
      integer(c_int32_t), value :: peer, tag
      integer(c_int64_t), value :: bytes, comm
    end subroutine gyr_msg_send

    subroutine gyr_msg_recv(peer, tag, bytes, comm) bind(C, name="gyr_msg_recv")
      import :: c_int32_t, c_int64_t
      integer(c_int32_t), value :: peer, tag
      integer(c_int64_t), value :: bytes, comm
    end subroutine gyr_msg_recv

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

contains

  ! The steering object `name`; c_null_ptr on error (see gyr_error()).
  function gyr_object(name, description) result(h)
    character(len=*), intent(in) :: name, description
    type(c_ptr) :: h
    h = gyr_object_new_c(name // c_null_char, description // c_null_char)
  end function gyr_object

  ! Binds a real(c_double) variable (declared with `target`) to the attribute `name`: clients
  ! may set values from min to max (a NaN bound, ieee_value(x, ieee_quiet_nan), is none), and
  ! the variable changes only at the program's synch points.
  function gyr_attr_double(obj, name, var, unit, min, max, flags) result(rc)
    type(c_ptr), intent(in) :: obj
    character(len=*), intent(in) :: name, unit
    real(c_double), target, intent(inout) :: var
    real(c_double), intent(in) :: min, max
    integer(c_int32_t), intent(in) :: flags
    integer(c_int32_t) :: rc
    rc = gyr_attr_double_c(obj, name // c_null_char, c_loc(var), unit // c_null_char, &
         min, max, flags)
  end function gyr_attr_double

  ! Binds an integer(c_int64_t) variable (declared with `target`) to the attribute `name`.
  function gyr_attr_int64(obj, name, var, unit, min, max, flags) result(rc)
    type(c_ptr), intent(in) :: obj
    character(len=*), intent(in) :: name, unit
    integer(c_int64_t), target, intent(inout) :: var
    real(c_double), intent(in) :: min, max
    integer(c_int32_t), intent(in) :: flags
    integer(c_int32_t) :: rc
    rc = gyr_attr_int64_c(obj, name // c_null_char, c_loc(var), unit // c_null_char, &
         min, max, flags)
  end function gyr_attr_int64

  ! Binds a logical(c_bool) variable (declared with `target`) to the attribute `name`.
  function gyr_attr_bool(obj, name, var, flags) result(rc)
    type(c_ptr), intent(in) :: obj
    character(len=*), intent(in) :: name
    logical(c_bool), target, intent(inout) :: var
    integer(c_int32_t), intent(in) :: flags
    integer(c_int32_t) :: rc
    rc = gyr_attr_bool_c(obj, name // c_null_char, c_loc(var), flags)
  end function gyr_attr_bool

  ! Adds the actuator `name` (parameters as "n: int, x: float"), run at a synch point.
  function gyr_actuator(obj, name, params, callback) result(rc)
    type(c_ptr), intent(in) :: obj
    character(len=*), intent(in) :: name, params
    procedure(gyr_callback) :: callback
    integer(c_int32_t) :: rc
    rc = gyr_actuator_c(obj, name // c_null_char, params // c_null_char, &
         c_funloc(callback), c_null_ptr)
  end function gyr_actuator

  ! Registers the function `name`, which clients call (on the steering server's thread).
  function gyr_function(name, params, callback) result(rc)
    character(len=*), intent(in) :: name, params
    procedure(gyr_callback) :: callback
    integer(c_int32_t) :: rc
    rc = gyr_function_c(name // c_null_char, params // c_null_char, c_funloc(callback), c_null_ptr)
  end function gyr_function

  ! A synch point: queued actuators run, a paused program waits, bound variables are exchanged.
  function gyr_sync(name) result(rc)
    character(len=*), intent(in) :: name
    integer(c_int32_t) :: rc
    rc = gyr_sync_point_c(name // c_null_char)
  end function gyr_sync

  ! Says that this process is rank `rank` of `size` in job `job`.
  function gyr_msg_init(job, rank, size) result(rc)
    character(len=*), intent(in) :: job
    integer(c_int32_t), intent(in) :: rank, size
    integer(c_int32_t) :: rc
    rc = gyr_msg_init_c(job // c_null_char, rank, size)
  end function gyr_msg_init

  ! Names the calling thread in gyr's views, before its first event.
  function gyr_thread_name(name) result(rc)
    character(len=*), intent(in) :: name
    integer(c_int32_t) :: rc
    rc = gyr_thread_set_name_c(name // c_null_char)
  end function gyr_thread_name

  ! Names the calling thread's role and index (an OpenMP thread: "omp", omp_get_thread_num()),
  ! so that threads of one role group into one row per index; after gyr_init.
  function gyr_thread_role(role, index) result(rc)
    character(len=*), intent(in) :: role
    integer, intent(in) :: index
    integer(c_int32_t) :: rc
    rc = gyr_thread_set_role_c(role // c_null_char, int(index, c_int64_t))
  end function gyr_thread_role

  ! The message of this thread's last failed call, as a Fortran string.
  function gyr_error() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = gyr_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function gyr_error
end module gyr
