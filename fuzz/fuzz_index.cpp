// libFuzzer target: Python-style indexing of tessera tensors. The input bytes decode into an
// index expression (ints, slices, None, Ellipsis, bool masks, integer index tensors, lists),
// which is applied with x[idx] and x[idx] = v through the real Python frontend (tessera._C and
// the CPU plugin) on tensors of several shapes, zero-size and 0-d included. A Python exception
// is a correct outcome; a crash, a sanitizer report or a hang is a bug.
// The decoder here is instrumented; tessera itself is the release build (run with
// -detect_leaks=0: the embedded interpreter keeps its objects until exit).
#include <Python.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

PyObject* g_tessera = nullptr;
std::vector<PyObject*> g_targets;  // tensors indexed by every input

struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  int64_t small_int() { return int64_t(int8_t(byte())) % 9; }  // -8..8: in and out of range
};

PyObject* call(const char* fn, PyObject* args, PyObject* kwargs = nullptr) {
  PyObject* f = PyObject_GetAttrString(g_tessera, fn);
  if (!f) return nullptr;
  PyObject* r = PyObject_Call(f, args, kwargs);
  Py_DECREF(f);
  return r;
}

// A tensor from a Python list of ints or bools.
PyObject* index_tensor(Reader& in, bool boolean) {
  int len = in.byte() % 6;
  PyObject* list = PyList_New(len);
  for (int i = 0; i < len; ++i)
    PyList_SET_ITEM(list, i, boolean ? PyBool_FromLong(in.byte() & 1) : PyLong_FromLongLong(in.small_int()));
  PyObject* args = PyTuple_Pack(1, list);
  Py_DECREF(list);
  PyObject* t = call("tensor", args);
  Py_DECREF(args);
  return t;
}

PyObject* component(Reader& in) {
  switch (in.byte() % 8) {
    case 0: return PyLong_FromLongLong(in.small_int());
    case 1: {
      auto part = [&]() -> PyObject* {
        uint8_t b = in.byte();
        if (b % 3 == 0) Py_RETURN_NONE;
        return PyLong_FromLongLong(int64_t(int8_t(b)) % 9);
      };
      PyObject *start = part(), *stop = part(), *step = part();
      PyObject* s = PySlice_New(start, stop, step);
      Py_DECREF(start), Py_DECREF(stop), Py_DECREF(step);
      return s;
    }
    case 2: Py_RETURN_NONE;
    case 3: Py_INCREF(Py_Ellipsis); return Py_Ellipsis;
    case 4: return index_tensor(in, true);
    case 5: return index_tensor(in, false);
    case 6: {  // a Python list of ints (advanced indexing)
      int len = in.byte() % 4;
      PyObject* list = PyList_New(len);
      for (int i = 0; i < len; ++i) PyList_SET_ITEM(list, i, PyLong_FromLongLong(in.small_int()));
      return list;
    }
    default: return PyBool_FromLong(in.byte() & 1);
  }
}

void try_index(PyObject* x, PyObject* idx, Reader& in) {
  PyObject* r = PyObject_GetItem(x, idx);
  Py_XDECREF(r);
  PyErr_Clear();
  PyObject* target = PyObject_CallMethod(x, "clone", nullptr);
  if (!target) return PyErr_Clear();
  PyObject* value = (in.byte() & 1) ? PyFloat_FromDouble(1.5) : PyObject_CallMethod(x, "sum", nullptr);
  if (value && PyObject_SetItem(target, idx, value) != 0) PyErr_Clear();
  Py_XDECREF(value);
  Py_DECREF(target);
  PyErr_Clear();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Py_Initialize();
  g_tessera = PyImport_ImportModule("tessera");
  if (!g_tessera) {
    PyErr_Print();
    std::fprintf(stderr, "fuzz_index: cannot import tessera (pip install the package for this Python, or set PYTHONPATH)\n");
    std::exit(2);
  }
  const char* shapes[] = {"ts.arange(60.0).reshape(3, 4, 5)", "ts.arange(6).reshape(2, 3)", "ts.tensor(7.0)",
                          "ts.zeros(0, 3)", "ts.arange(10.0)[::2]"};
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "ts", g_tessera);
  for (const char* s : shapes) {
    PyObject* t = PyRun_String(s, Py_eval_input, globals, globals);
    if (!t) {
      PyErr_Print();
      std::exit(2);
    }
    g_targets.push_back(t);
  }
  Py_DECREF(globals);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  PyObject* x = g_targets[in.byte() % g_targets.size()];
  int parts = in.byte() % 5;
  PyObject* idx;
  if (parts == 0) {
    idx = component(in);  // a bare index, not a tuple
  } else {
    idx = PyTuple_New(parts);
    for (int i = 0; i < parts; ++i) {
      PyObject* c = component(in);
      if (!c) {
        PyErr_Clear();
        c = Py_None;
        Py_INCREF(c);
      }
      PyTuple_SET_ITEM(idx, i, c);
    }
  }
  if (!idx) {
    PyErr_Clear();
    return 0;
  }
  try_index(x, idx, in);
  Py_DECREF(idx);
  return 0;
}
