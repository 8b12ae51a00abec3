/*
 * tessera/abi.h — the stable C ABI between the Tessera host (libtessera.so) and its plugins.
 *
 * This header is the only binary contract. It includes only C standard headers, so a plugin
 * built with any compiler and any C++ standard library (clang + libc++, say) loads into a host
 * built with another (g++ + libstdc++).
 *
 * Rules every struct and call follows:
 *   - Every struct that crosses the boundary begins with `size_t struct_size`, set by whoever
 *     fills it to sizeof() of the struct as *it* was compiled. The reader only touches fields
 *     that lie inside struct_size; fields are only ever appended (see TS_STRUCT_HAS).
 *   - Handles (ts_tensor, ts_operator) are opaque. Tensor handles are reference counted:
 *     a handle returned by the host through an `// out` parameter is a new reference that the
 *     receiver releases; handles passed *into* a kernel on its stack are borrowed.
 *   - No C++ exception crosses. Calls return ts_status; the message of a failure is handed to
 *     the host with host->set_error() and raised by the host with the plugin's name, the
 *     operator and the device.
 *   - `// out` marks parameters the callee writes.
 *
 * Versioning. TESSERA_ABI_MAJOR changes only on a breaking change. TESSERA_ABI_MINOR grows
 * with additive changes (new host functions appended to ts_host_api, new fields appended to
 * structs). The host loads a plugin built against the same major and any minor <= its own,
 * provided the plugin accepts the host's minor (ts_plugin_info.min_host_abi_minor).
 *
 * Changelog of minor versions (major 1):
 *   1.0  First stable version: handshake, operators, boxed kernels, devices, tensors.
 *   1.1  ts_host_api.default_float_dtype: the dtype a kernel gives a float result that no
 *        input decides (a Python float, int -> float promotion, float factories).
 *   1.2  Transform plugins (autograd, vmap, tracing): per-tensor extension slots, a tensor's
 *        transform keys, the version counter, the thread's included/excluded keys, and
 *        callbacks that a frontend registers with the host and a plugin invokes by id.
 *        Tensor[] returns (see ts_stack).
 *   1.3  Streams and events (ts_device_desc: stream_create .. event_elapsed_ms), stream-ordered
 *        memory (record_stream), page-locked host memory (host_allocate, pin_memory) and
 *        asynchronous copies to and from it (copy_to_host_async, copy_from_host_async);
 *        ts_host_api.current_stream / set_current_stream for plugins that run work on threads
 *        of their own.
 *        set_error(NULL, message) outside init records the message of the device function
 *        (a ts_device_desc function, which has no call) that is about to fail on this thread.
 *   1.4  Composite kernels: register_kernel's keys TS_KEY_COMPOSITE_IMPLICIT and
 *        TS_KEY_COMPOSITE_EXPLICIT register an operator's decomposition into other operators,
 *        used on every device that has no kernel of its own for it.
 *   1.5  Complex dtypes TS_COMPLEX64 and TS_COMPLEX128 (interleaved real, imaginary pairs, as
 *        C99 _Complex and std::complex); ts_host_api.tensor_alias_dtype for views that
 *        reinterpret a storage as another dtype (view_as_real, view_as_complex). A plugin
 *        built against an older minor never sees complex tensors it did not ask for: its dtype
 *        switch refuses them with a TypeError.
 *   1.6  Observability: ts_observer and ts_host_api.set_observer .. observe_device_span. One
 *        observer (the profiler plugin) sees every dispatched operator call, the ranges that
 *        frontends and plugins mark (user ranges, autograd's backward nodes), which operator
 *        created which autograd node, allocator events and device activity. Without an
 *        observer each report costs one atomic load. ts_host_api.device_type_id: a device
 *        plugin's own device type id (ts_device.type of its tensors), by name.
 *   1.7  Distributed: process-group backends (Gloo, NCCL, a vendor's) register with
 *        ts_host_api.register_process_group_backend. The host lends a backend a ts_store (the
 *        ranks' shared key-value store) to meet its peers, then starts collectives on it
 *        (ts_collective) and waits on the ts_work handles they return.
 *        ts_device_desc.native_stream and ts_host_api.native_stream: the vendor runtime's own
 *        handle of a stream (a cudaStream_t), so a library of the same vendor (NCCL) runs its work
 *        in the caller's stream order.
 *   1.8  ts_process_group_backend.work_source_rank: the rank a receive from any rank (root -1)
 *        got its data from (torch's recv(src=None) returns it). A 1.7 backend's description,
 *        without it, is still accepted; such a backend refuses receives from any rank.
 *        ts_host_api.tensor_use_count.
 */
#ifndef TESSERA_ABI_H
#define TESSERA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_ABI_MAJOR 1
#define TESSERA_ABI_MINOR 8

/* True when a struct filled by the other side, of size `s->struct_size`, contains `field`. */
#define TS_STRUCT_HAS(s, type, field) \
  ((s)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

#if defined(_WIN32)
#define TS_EXPORT __declspec(dllexport)
#else
#define TS_EXPORT __attribute__((visibility("default")))
#endif

/* ----------------------------------------------------------------------------- status */
typedef int32_t ts_status;
enum {
  TS_OK = 0,
  TS_ERROR = 1,               /* generic failure, message set with set_error */
  TS_ERROR_TYPE = 2,          /* wrong dtype / argument type   -> TypeError */
  TS_ERROR_VALUE = 3,         /* bad value, shape mismatch      -> ValueError/RuntimeError */
  TS_ERROR_INDEX = 4,         /* index or dim out of range      -> IndexError */
  TS_ERROR_NOT_IMPLEMENTED = 5,
  TS_ERROR_OUT_OF_MEMORY = 6,
  TS_ERROR_INCOMPATIBLE = 7   /* handshake: plugin and host versions do not fit */
};

/* ----------------------------------------------------------------------------- handles */
typedef struct ts_tensor_s* ts_tensor;      /* opaque, reference counted */
typedef struct ts_operator_s* ts_operator;  /* opaque, lives as long as the host */
typedef struct ts_call_s* ts_call;          /* opaque per-call context handed to kernels */
typedef struct ts_registrar_s* ts_registrar;/* opaque, valid during tessera_plugin_init */
typedef uint64_t ts_keyset;                 /* dispatch key set, bit k = key k */
typedef int32_t ts_dispatch_key;            /* a bit index 0..63 */
/* 1.3: owned by the device plugin that made them; the host destroys what it created. */
typedef struct ts_stream_s* ts_stream;      /* a queue of work on one device; NULL: the default stream */
typedef struct ts_event_s* ts_event;        /* a marker recorded on a stream */

/* ----------------------------------------------------------------------------- dtypes */
/* Codes are part of the ABI: never renumber, only append. */
typedef enum {
  TS_BOOL = 0, TS_UINT8 = 1, TS_INT8 = 2, TS_INT16 = 3, TS_INT32 = 4, TS_INT64 = 5,
  TS_FLOAT16 = 6, TS_BFLOAT16 = 7, TS_FLOAT32 = 8, TS_FLOAT64 = 9,
  TS_COMPLEX64 = 10, TS_COMPLEX128 = 11 /* 1.5 */
} ts_dtype;
#define TS_NUM_DTYPES 12

/* A device: the host-assigned type id of its device type (0 is "cpu") and an index. */
typedef struct {
  int32_t type;
  int32_t index;
} ts_device;

/* DLPack-shaped view of a tensor, valid while the caller holds the tensor. Shape and
 * strides (in elements) point into the tensor itself. data + byte_offset is the first element. */
typedef struct {
  size_t struct_size;
  void* data;
  ts_device device;
  int32_t dtype;          /* ts_dtype */
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
  int64_t byte_offset;
  int64_t numel;
} ts_tensor_view;

/* ----------------------------------------------------------------------------- boxed values */
typedef enum {
  TS_VALUE_NONE = 0,
  TS_VALUE_TENSOR = 1,
  TS_VALUE_INT = 2,         /* int, SymInt, and Scalar holding an integer */
  TS_VALUE_DOUBLE = 3,      /* float, and Scalar holding a float */
  TS_VALUE_BOOL = 4,        /* bool, and Scalar holding a bool */
  TS_VALUE_INT_LIST = 5,
  TS_VALUE_TENSOR_LIST = 6,
  TS_VALUE_STRING = 7,
  TS_VALUE_DTYPE = 8,       /* ScalarType: .i holds a ts_dtype */
  TS_VALUE_DEVICE = 9,      /* Device: .device */
  TS_VALUE_DOUBLE_LIST = 10
} ts_value_tag;

/* One slot of the boxed stack. Lists and strings point into memory that the *caller*
 * owns for the duration of the call. 16 bytes + tag: small enough to live on the C stack. */
typedef struct {
  int32_t tag; /* ts_value_tag */
  int32_t reserved;
  union {
    ts_tensor tensor;
    int64_t i;
    double d;
    int32_t b;
    ts_device device;
    const char* str;
    struct { const int64_t* data; int64_t size; } ints;
    struct { const double* data; int64_t size; } doubles;
    struct { const ts_tensor* data; int64_t size; } tensors;
  } u;
} ts_value;

/* The boxed stack of a call. On entry values[0..size) are the arguments in schema order
 * (borrowed). A kernel replaces them with the returns: it writes values[0..n_returns)
 * (tensor returns are new references) and sets size = n_returns. capacity >= max(args, returns).
 * A Tensor[] return (1.2) points to an array the kernel keeps alive until the calling thread's
 * next call into the same plugin; its tensors are new references that the receiver takes over
 * at once. Elements may be NULL (an undefined tensor, e.g. an unused gradient). */
typedef struct {
  size_t struct_size;
  ts_value* values;
  int32_t size;
  int32_t capacity;
} ts_stack;

/* A boxed kernel. `kernel_data` is what the plugin gave at registration; `keys` is the key set
 * the call was dispatched with (transform kernels redispatch below their own key). */
typedef ts_status (*ts_kernel_fn)(void* kernel_data, ts_call call, ts_keyset keys, ts_stack* stack);

/* ----------------------------------------------------------------------------- devices */
/* What a device plugin provides for its device type. NULL slots are optional with the
 * documented default. All memory functions work on the plugin's own memory; the host never
 * dereferences device pointers of a device whose `host_accessible` is 0. */
typedef struct {
  size_t struct_size;
  const char* name;                 /* "cpu", "cuda", "mydevice": lower case, unique */
  int32_t host_accessible;          /* 1 if device pointers may be read by the host (CPU) */
  void* device_data;                /* handed back to every function below */
  int32_t (*device_count)(void* device_data);
  /* Allocate nbytes (nbytes may be 0). Returns NULL on failure, with *error set. */
  void* (*allocate)(void* device_data, int32_t index, size_t nbytes);
  void (*deallocate)(void* device_data, int32_t index, void* ptr, size_t nbytes);
  ts_status (*copy_to_host)(void* device_data, int32_t index, void* host_dst, const void* src, size_t nbytes);
  ts_status (*copy_from_host)(void* device_data, int32_t index, void* dst, const void* host_src, size_t nbytes);
  /* NULL: the host copies through host memory. */
  ts_status (*copy_within)(void* device_data, int32_t index, void* dst, const void* src, size_t nbytes);
  /* NULL: the device is synchronous. */
  ts_status (*synchronize)(void* device_data, int32_t index);

  /* --- 1.3: streams and events. A stream is an ordered queue of work on device `index`; the
   * NULL stream is the device's default stream. Each thread has a current stream per device,
   * initially the default: the plugin's kernels and copies called from that thread queue their
   * work on it. The host tells the plugin the current stream with set_current_stream and owns
   * the streams it creates (it never destroys a stream that is current on some thread).
   * stream_create NULL: the device has only its default stream, and the host treats every
   * stream and event function as synchronous (queries are done, waits return at once,
   * events carry the host clock). A plugin that fills stream_create fills all of them up
   * to event_elapsed_ms. On failure a function calls set_error(NULL, message). */
  ts_status (*stream_create)(void* device_data, int32_t index, int32_t priority, ts_stream* out /* out */);
  void (*stream_destroy)(void* device_data, int32_t index, ts_stream stream);
  ts_status (*set_current_stream)(void* device_data, int32_t index, ts_stream stream);
  /* Blocks until the work queued on `stream` so far has finished. */
  ts_status (*stream_synchronize)(void* device_data, int32_t index, ts_stream stream);
  /* *done = 1 when all work queued on `stream` has finished, else 0; does not block. */
  ts_status (*stream_query)(void* device_data, int32_t index, ts_stream stream, int32_t* done /* out */);
  /* Work queued on `stream` after this call starts only when `event` has completed. */
  ts_status (*stream_wait_event)(void* device_data, int32_t index, ts_stream stream, ts_event event);
  /* flags: TS_EVENT_* bits. */
  ts_status (*event_create)(void* device_data, int32_t index, int32_t flags, ts_event* out /* out */);
  void (*event_destroy)(void* device_data, int32_t index, ts_event event);
  /* The event completes when the work queued on `stream` before this call has finished.
   * Recording again replaces what it waited for. */
  ts_status (*event_record)(void* device_data, int32_t index, ts_event event, ts_stream stream);
  ts_status (*event_synchronize)(void* device_data, int32_t index, ts_event event);
  ts_status (*event_query)(void* device_data, int32_t index, ts_event event, int32_t* done /* out */);
  /* Milliseconds from `start` to `end`, both recorded, completed and made with TS_EVENT_TIMING. */
  ts_status (*event_elapsed_ms)(void* device_data, int32_t index, ts_event start, ts_event end, double* ms /* out */);
  /* The block at `ptr` (from allocate) is in use by work queued on `stream`: when it is freed,
   * the allocator must not hand it out again before that work is done. NULL: the allocator
   * needs no such note (it is not stream-ordered). */
  ts_status (*record_stream)(void* device_data, int32_t index, void* ptr, ts_stream stream);
  /* Page-locked host memory that copies to and from this device can use without staging
   * (Tensor.pin_memory). The host reads and writes it directly. NULL: not offered. */
  void* (*host_allocate)(void* device_data, size_t nbytes);
  void (*host_deallocate)(void* device_data, void* ptr, size_t nbytes);
  /* Copies queued on the calling thread's current stream that may return before they finish
   * (Tensor.to(device, non_blocking=True)). The host passes them only host memory inside a
   * block from host_allocate; the plugin keeps such a block alive until the copies that use it
   * are done, even when host_deallocate comes first. NULL: the host uses the synchronous copies. */
  ts_status (*copy_to_host_async)(void* device_data, int32_t index, void* host_dst, const void* src, size_t nbytes);
  ts_status (*copy_from_host_async)(void* device_data, int32_t index, void* dst, const void* host_src, size_t nbytes);

  /* --- 1.7: the vendor runtime's handle of `stream` on device `index` (NULL: the default stream),
   * e.g. a cudaStream_t, for libraries of the same runtime that queue work in the caller's stream
   * order (NCCL). NULL slot or NULL result: the device has no such handle. */
  void* (*native_stream)(void* device_data, int32_t index, ts_stream stream);
} ts_device_desc;

/* ts_device_desc.event_create flags (1.3). */
enum { TS_EVENT_DEFAULT = 0, TS_EVENT_TIMING = 1 };

/* ----------------------------------------------------------------------------- handshake */
/* Filled by the plugin in tessera_plugin_init (// out). The host sets struct_size to its own
 * sizeof before the call; the plugin writes only fields inside it. */
typedef struct {
  size_t struct_size;
  const char* name;                 /* static string, e.g. "cpu" */
  const char* version;              /* static string, the plugin's own version, e.g. "0.1.0" */
  int32_t abi_major;                /* TESSERA_ABI_MAJOR the plugin was built against */
  int32_t abi_minor;                /* TESSERA_ABI_MINOR the plugin was built against */
  int32_t min_host_abi_minor;       /* oldest host minor (same major) the plugin accepts */
  int32_t reserved;
} ts_plugin_info;

/* ----------------------------------------------------------------------------- observer (1.6) */
/* What an observer (set with ts_host_api.set_observer) is told. Times are nanoseconds of
 * CLOCK_MONOTONIC (std::chrono::steady_clock), the clock every reporter uses. Callbacks run on
 * the thread that did the work, may run on many threads at once, must not throw, and may be
 * NULL (not interested). */
typedef struct ts_observer {
  size_t struct_size;
  void* data;
  /* An operator call dispatched from its entry point (a frontend, call_operator; not a
   * redispatch to a lower key), before its kernel runs, with its arguments; and after it
   * returned or failed. Every op_enter is followed by one op_exit on the same thread, nested. */
  void (*op_enter)(void* data, ts_operator op, const ts_stack* arguments);
  void (*op_exit)(void* data, ts_operator op);
  /* A named range (phase 0 begins, 1 ends; nested like operator calls on the thread):
   * a user's record_function, or an autograd node's backward with its sequence number. */
  void (*range)(void* data, int32_t phase, const char* name, int64_t sequence_nr);
  /* The innermost running operator on this thread created the autograd node `sequence_nr`. */
  void (*sequence_nr)(void* data, int64_t sequence_nr);
  /* An allocation (nbytes > 0) or a free (nbytes < 0) of device memory at ptr; `allocated` is
   * the device's total allocated bytes afterwards. */
  void (*memory)(void* data, ts_device device, const void* ptr, int64_t nbytes, int64_t allocated);
  /* Work a device ran (a kernel, a copy) from begin_ns to end_ns. */
  void (*device_span)(void* data, ts_device device, const char* name, int64_t begin_ns, int64_t end_ns);
} ts_observer;

/* ----------------------------------------------------------------------------- distributed (1.7) */
/* A key-value store that every rank of a group reaches (a TCP server, a shared file), lent by the
 * host to a backend's `create` for the rendezvous and valid only during that call. On failure a
 * function has set the message (host->set_error(NULL, ...) semantics) and returns an error status. */
typedef struct ts_store {
  size_t struct_size;
  void* data;
  ts_status (*set)(void* data, const char* key, const void* value, size_t size);
  /* Waits up to timeout_ms (< 0: the store's own timeout) for `key`, then hands its value to
   * `sink` (valid only during that call). A timeout is TS_ERROR with a message naming the key. */
  ts_status (*get)(void* data, const char* key, int64_t timeout_ms,
                   void (*sink)(void* sink_data, const void* value, size_t size), void* sink_data);
  /* Adds `delta` to the integer stored at `key` (0 when absent); *value is the sum. */
  ts_status (*add)(void* data, const char* key, int64_t delta, int64_t* value /* out */);
} ts_store;

typedef struct ts_process_group_s* ts_process_group;  /* owned by the backend */
typedef struct ts_work_s* ts_work;                    /* owned by the backend until work_release */

/* Codes are part of the ABI: never renumber, only append. */
typedef enum {
  TS_COLLECTIVE_ALL_REDUCE = 0,     /* in place: inputs[0] reduced across ranks */
  TS_COLLECTIVE_BROADCAST = 1,      /* in place: inputs[0] of rank `root` to every rank */
  TS_COLLECTIVE_REDUCE = 2,         /* in place: inputs[0] reduced into rank `root`'s */
  TS_COLLECTIVE_ALL_GATHER = 3,     /* inputs[0] (n elements) -> outputs[0] (size * n, rank order) */
  TS_COLLECTIVE_GATHER = 4,         /* the same, outputs[0] on rank `root` only */
  TS_COLLECTIVE_SCATTER = 5,        /* inputs[0] (size * n) on `root` -> outputs[0] (n) */
  TS_COLLECTIVE_REDUCE_SCATTER = 6, /* inputs[0] (size * n) reduced; rank r gets block r in outputs[0] */
  TS_COLLECTIVE_ALL_TO_ALL = 7,     /* inputs[0] split by input_splits (elements per rank) ->
                                       outputs[0] by output_splits; NULL splits: equal blocks */
  TS_COLLECTIVE_BARRIER = 8,
  TS_COLLECTIVE_SEND = 9,           /* inputs[0] to rank `root`, matched by `tag` */
  TS_COLLECTIVE_RECV = 10           /* outputs[0] from rank `root` (-1: any rank), matched by `tag` */
} ts_collective_kind;

typedef enum { TS_REDUCE_SUM = 0, TS_REDUCE_PRODUCT = 1, TS_REDUCE_MIN = 2, TS_REDUCE_MAX = 3 } ts_reduce_op;

/* One collective. Tensors are contiguous, on the backend's device, borrowed: the host keeps them
 * alive until the work is released. Every rank starts the same collectives in the same order. */
typedef struct {
  size_t struct_size;
  int32_t kind;        /* ts_collective_kind */
  int32_t reduce_op;   /* ts_reduce_op */
  int32_t root;        /* root rank, or the peer of send/recv */
  int32_t tag;
  const ts_tensor* inputs;
  int64_t n_inputs;
  const ts_tensor* outputs;
  int64_t n_outputs;
  const int64_t* input_splits;   /* all-to-all: `size` element counts, or NULL */
  const int64_t* output_splits;
  int64_t timeout_ms;  /* this collective's timeout */
} ts_collective;

/* What a process-group backend provides. A backend runs a group's collectives in the order they
 * were started (on threads or a device stream of its own) and never blocks `start` on peers. */
typedef struct {
  size_t struct_size;
  const char* name;          /* "gloo", "nccl": lower case, unique */
  const char* device_types;  /* the device types whose tensors it takes, comma-separated: "cpu" */
  void* backend_data;
  /* Meets the other `size` ranks through `store` (keys it uses start with its own prefix) and
   * returns a group; fails with a message naming the ranks it did not reach by timeout_ms. */
  ts_status (*create)(void* backend_data, const ts_store* store, int32_t rank, int32_t size,
                      int64_t timeout_ms, ts_process_group* out /* out */);
  /* Ends the group: collectives still running fail; every work handle stays valid to release. */
  void (*destroy)(void* backend_data, ts_process_group group);
  /* Queues one collective; *out is its work handle. Argument errors are reported here. */
  ts_status (*start)(void* backend_data, ts_process_group group, const ts_collective* collective,
                     ts_work* out /* out */);
  /* Waits up to timeout_ms (< 0: for the collective's own timeout) for the work. TS_OK when it
   * completed; an error status with the message of its failure or of the timeout. */
  ts_status (*work_wait)(void* backend_data, ts_work work, int64_t timeout_ms);
  /* 1 when the work has finished (completed or failed), else 0; does not block. */
  int32_t (*work_is_completed)(void* backend_data, ts_work work);
  void (*work_release)(void* backend_data, ts_work work);
  /* --- 1.8: the group rank a finished receive from any rank (root -1) got its data from; -1 for
   * any other work, or one not finished. NULL: the backend does not receive from any rank. */
  int32_t (*work_source_rank)(void* backend_data, ts_work work);
} ts_process_group_backend;

/* ----------------------------------------------------------------------------- host API */
/* The table of host functions a plugin calls. Appended to only; check struct_size (or
 * abi_minor) before using a function added after 1.0. */
typedef struct ts_host_api {
  size_t struct_size;
  int32_t abi_major;
  int32_t abi_minor;
  const char* host_version;

  /* --- errors and warnings */
  /* Records the message of the failure the caller is about to return. `call` may be NULL
   * (during init). */
  void (*set_error)(ts_call call, const char* message);
  void (*warn)(ts_call call, const char* message);

  /* --- registration (only inside tessera_plugin_init, on its registrar).
   * Nothing becomes visible before init returns TS_OK: a refused plugin leaves nothing. */
  /* Declares a new operator from a schema string ("myns::op(Tensor x) -> Tensor"). */
  ts_status (*def_operator)(ts_registrar reg, const char* schema);
  /* Registers `fn` for operator `name` ("add.Tensor", "add" for no overload) under `key`.
   * key TS_KEY_CATCH_ALL (1.2): the kernel serves every key that has no kernel of its own (an
   * operator that works on any tensor, like autograd's control operators). */
  ts_status (*register_kernel)(ts_registrar reg, const char* op_name, ts_dispatch_key key,
                               ts_kernel_fn fn, void* kernel_data);
  /* Marks operator `op_name` as fallthrough for `key` (NULL op_name: every operator). */
  ts_status (*register_fallthrough)(ts_registrar reg, const char* op_name, ts_dispatch_key key);
  /* A boxed kernel used for every operator without its own kernel at `key`. */
  ts_status (*register_fallback)(ts_registrar reg, ts_dispatch_key key, ts_kernel_fn fn, void* kernel_data);
  /* Registers a device type; writes the dispatch key the host gives it. */
  ts_status (*register_device)(ts_registrar reg, const ts_device_desc* desc, ts_dispatch_key* key /* out */);
  /* Looks up a named key: "CPU", "CUDA", "HIP", "Autograd", "Batched", "Tracer", or a device name. */
  ts_status (*find_dispatch_key)(const char* name, ts_dispatch_key* key /* out */);

  /* --- operators */
  /* Resolves an operator once, at load time. NULL if none. */
  ts_operator (*find_operator)(const char* op_name);
  /* Calls an operator through the full dispatcher. */
  ts_status (*call_operator)(ts_call call, ts_operator op, ts_stack* stack);
  /* Calls with an explicit key set (redispatch below a transform's key). */
  ts_status (*redispatch)(ts_call call, ts_operator op, ts_keyset keys, ts_stack* stack);

  /* --- tensors */
  void (*tensor_retain)(ts_tensor t);
  void (*tensor_release)(ts_tensor t);
  /* Fills a DLPack-shaped view; view->struct_size must be set by the caller. */
  ts_status (*tensor_get_view)(ts_tensor t, ts_tensor_view* view /* out */);
  /* A new tensor on `device` with fresh storage. strides NULL: contiguous. */
  ts_status (*tensor_empty)(ts_call call, int32_t ndim, const int64_t* shape, const int64_t* strides,
                            int32_t dtype, ts_device device, ts_tensor* out /* out */);
  /* A new tensor sharing `base`'s storage: a view with the given geometry (offset in elements). */
  ts_status (*tensor_alias)(ts_call call, ts_tensor base, int32_t ndim, const int64_t* shape,
                            const int64_t* strides, int64_t storage_offset, ts_tensor* out /* out */);
  /* The storage offset of a tensor, in elements. */
  int64_t (*tensor_storage_offset)(ts_tensor t);
  /* Resizes an out= tensor to `shape` (contiguous), reallocating its storage if needed. */
  ts_status (*tensor_resize)(ts_call call, ts_tensor t, int32_t ndim, const int64_t* shape);
  /* Marks a tensor as written (bumps its version counter). */
  void (*tensor_bump_version)(ts_tensor t);

  /* --- random numbers: the next seed of the default generator of `device`'s type; the
   * generator is reseeded by manual_seed, so a kernel seeding its own engine from it is
   * reproducible. */
  uint64_t (*next_random_seed)(ts_device device);

  /* --- threading: the number of threads a kernel may use. */
  int32_t (*num_threads)(void);

  /* --- 1.1 */
  /* The default floating dtype (torch.get_default_dtype()): float32 unless the user changed it. */
  int32_t (*default_float_dtype)(void);

  /* --- 1.2: transforms. A transform plugin keeps its per-tensor state in an extension slot
   * (fixed assignment, TS_SLOT_*), marks the tensors it tracks with its dispatch key, and
   * redispatches below its key by excluding it in the thread's key set. */
  /* The slot's data, NULL when unset. */
  void* (*tensor_get_slot)(ts_tensor t, int32_t slot);
  /* Replaces the slot's data (the old data is destroyed); `destroy(data)` runs when the
   * tensor dies. `destroy` may be NULL. */
  ts_status (*tensor_set_slot)(ts_tensor t, int32_t slot, void* data, void (*destroy)(void*));
  /* The tensor's dispatch key set. */
  ts_keyset (*tensor_keys)(ts_tensor t);
  /* Adds and removes keys of a tensor; only transform keys (>= TS_FIRST_TRANSFORM_KEY) may change. */
  ts_status (*tensor_update_keys)(ts_tensor t, ts_keyset add, ts_keyset remove);
  /* The version counter of the tensor's storage (bumped by every in-place write). */
  uint64_t (*tensor_version)(ts_tensor t);
  /* The calling thread's included and excluded keys, and setting them (save, set, restore). */
  void (*tls_keys)(ts_keyset* included /* out */, ts_keyset* excluded /* out */);
  void (*set_tls_keys)(ts_keyset included, ts_keyset excluded);
  /* Calls a callback a frontend registered with the host (a Python hook, a custom function's
   * backward), by id, with a boxed stack (arguments in, returns out, as a kernel). */
  ts_status (*invoke_callback)(ts_call call, int64_t id, ts_stack* stack);
  /* Drops the plugin's interest in a callback; the host frees it when nobody holds it. */
  void (*release_callback)(int64_t id);
  /* The operator a call is running (for boxed fallbacks, which serve every operator), and an
   * operator's full name ("add.Tensor"). */
  ts_operator (*call_operator_of)(ts_call call);
  const char* (*operator_name)(ts_operator op);

  /* --- 1.3: streams. The calling thread's current stream of `device` (NULL: its default
   * stream), and making a stream that current_stream returned current on the calling thread:
   * a plugin that runs device work on threads of its own (autograd's device workers) keeps it
   * in the caller's stream order. */
  ts_stream (*current_stream)(ts_device device);
  ts_status (*set_current_stream)(ts_call call, ts_device device, ts_stream stream);

  /* --- 1.5: a view of `base`'s storage as another dtype (offset in elements of `dtype`; the
   * view's bytes must lie inside the storage and the offset's byte position must be a multiple
   * of the dtype's size). Used by view_as_real / view_as_complex. */
  ts_status (*tensor_alias_dtype)(ts_call call, ts_tensor base, int32_t ndim, const int64_t* shape,
                                  const int64_t* strides, int64_t storage_offset, int32_t dtype,
                                  ts_tensor* out /* out */);

  /* --- 1.6: observability. set_observer installs the process's one observer (copied; NULL
   * removes it; a second observer while one is installed is refused). observing() is nonzero
   * while one is installed: a reporter checks it before building a report. The observe_*
   * functions pass a report on to the observer (and do nothing without one). */
  ts_status (*set_observer)(ts_call call, const ts_observer* observer);
  int32_t (*observing)(void);
  void (*observe_range)(int32_t phase, const char* name, int64_t sequence_nr);
  void (*observe_sequence_nr)(int64_t sequence_nr);
  void (*observe_memory)(ts_device device, const void* ptr, int64_t nbytes, int64_t allocated);
  void (*observe_device_span)(ts_device device, const char* name, int64_t begin_ns, int64_t end_ns);

  /* --- 1.6: the device type id of a device type name (what ts_device.type holds for its
   * tensors), or -1 when no plugin registered that name. A device plugin asks for its own after
   * register_device: the id is not its dispatch key in general. */
  int32_t (*device_type_id)(const char* name);

  /* --- 1.7: distributed. Registers a process-group backend (only inside tessera_plugin_init);
   * the host copies the description. */
  ts_status (*register_process_group_backend)(ts_registrar reg, const ts_process_group_backend* backend);
  /* The native handle of `stream` (from current_stream) of `device`, from its plugin's
   * ts_device_desc.native_stream; NULL when the device offers none. */
  void* (*native_stream)(ts_device device, ts_stream stream);

  /* --- 1.8: how many references the tensor handle has (the caller's included): autograd hands a
   * gradient nobody else holds to .grad instead of copying it, as torch's AccumulateGrad. */
  int64_t (*tensor_use_count)(ts_tensor t);
} ts_host_api;

/* Extension slots (ts_host_api.tensor_get_slot), one per transform. */
enum { TS_SLOT_AUTOGRAD = 0, TS_SLOT_BATCHED = 1, TS_SLOT_TRACER = 2, TS_SLOT_SPARE = 3 };
/* Keys below this are backends; tensor_update_keys changes only keys at or above it. */
#define TS_FIRST_TRANSFORM_KEY 24
/* register_kernel's key for a kernel that serves every key without its own (1.2). */
#define TS_KEY_CATCH_ALL (-1)
/* register_kernel's keys for an operator's decomposition into other operators (1.4), consulted
 * when the dispatch key has no kernel of its own for the operator. IMPLICIT (PyTorch's
 * CompositeImplicitAutograd) serves backend and Autograd keys, so autograd records the
 * decomposed calls; EXPLICIT (CompositeExplicitAutograd) serves backend keys only, for an
 * operator with a derivative formula of its own. A device's own kernel always wins. */
#define TS_KEY_COMPOSITE_IMPLICIT (-2)
#define TS_KEY_COMPOSITE_EXPLICIT (-3)

/* ----------------------------------------------------------------------------- entry point */
/* The one symbol every plugin exports. The plugin checks host->abi_major/minor, fills
 * *info (always, even when it refuses, so the host can say who refused), registers what it
 * provides through `reg`, and returns TS_OK; or returns an error status after
 * host->set_error(NULL, message). */
#define TESSERA_PLUGIN_ENTRY_NAME "tessera_plugin_init"
typedef ts_status (*ts_plugin_init_fn)(const ts_host_api* host, ts_registrar reg, ts_plugin_info* info /* out */);

/* ----------------------------------------------------------------------------- layout checks */
#if defined(__cplusplus)
#define TS_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define TS_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
TS_STATIC_ASSERT(sizeof(ts_device) == 8, "ts_device layout changed");
TS_STATIC_ASSERT(sizeof(ts_value) == 24, "ts_value layout changed");
TS_STATIC_ASSERT(sizeof(ts_stack) == 24, "ts_stack layout changed");
TS_STATIC_ASSERT(sizeof(ts_tensor_view) == 64, "ts_tensor_view layout changed");
TS_STATIC_ASSERT(sizeof(ts_plugin_info) == 40, "ts_plugin_info layout changed");
TS_STATIC_ASSERT(sizeof(ts_device_desc) == 232, "ts_device_desc layout changed (1.7): append only");
TS_STATIC_ASSERT(sizeof(ts_host_api) == 392, "ts_host_api layout changed (1.8): append only");
TS_STATIC_ASSERT(sizeof(ts_collective) == 80, "ts_collective layout changed (1.7): append only");
TS_STATIC_ASSERT(sizeof(ts_process_group_backend) == 88, "ts_process_group_backend layout changed (1.8): append only");
TS_STATIC_ASSERT(sizeof(ts_observer) == 64, "ts_observer layout changed (1.6): append only");
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_ABI_H */
