// _C.plugins_load / plugins_list / plugins_describe: the plugin host seen from Python.
#include "bindings.h"
#include "convert.h"

#include <tessera/cpu_fallback.h>
#include <tessera/dispatcher.h>
#include <tessera/observer.h>
#include <tessera/runtime.h>

#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace py = pybind11;

namespace tessera::python {

std::vector<OperatorHandle> overloads_of(const std::string& name);  // ops.cpp

namespace {

py::dict info_dict(const PluginInfo& p) {
  py::dict d;
  d["name"] = p.name;
  d["version"] = p.version;
  d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
  d["path"] = p.path;
  d["devices"] = p.devices;
  d["kernels"] = p.kernels;
  d["fallbacks"] = p.fallbacks;
  // The host records bare schema names ("double_it"); report the names call_op takes
  // ("test::double_it"), found as the operators this plugin defined.
  std::vector<std::string> defined;
  for (OperatorHandle op : Dispatcher::instance().operators()) {
    if (op->defined_by() != p.name) continue;
    const FunctionSchema& s = op->schema();
    std::string base = s.ns.empty() ? s.name : s.ns + "::" + s.name;
    if (std::find(defined.begin(), defined.end(), base) == defined.end()) defined.push_back(base);
  }
  d["operators_defined"] = defined.empty() ? p.operators_defined : defined;
  return d;
}

// Plugins' warnings as Python sees them: a kernel's warning is a UserWarning raised at the
// Python line that called the operator (so filters, pytest and `-W error` apply); what a plugin
// said while loading goes to the "tessera" logger at INFO (quiet by default: the same text is
// kept with the device type and shown in the error where that device is requested). Operators
// run without the GIL, so the calling thread keeps its warnings until GilRelease takes the GIL
// back; a thread that is in no such call (a kernel's worker) prints to stderr, as before.
void issue(const std::string& text, bool at_load) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // an error being raised must survive the warning
  if (at_load) {
    try {
      py::module_::import("logging").attr("getLogger")("tessera").attr("info")(text);
    } catch (py::error_already_set&) {
      PyErr_Clear();
    }
  } else if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) < 0) {
    // `-W error`: the warning became an exception, which the operator's caller cannot receive
    // from here (the call has returned its values): show it instead.
    PyErr_Print();
  }
  PyErr_Restore(type, value, traceback);
}

void python_warning_handler(const char* where, const char* message, bool at_load) {
  const std::string text = std::string(where) + ": " + message;
  if (at_load) {
    const char* print = std::getenv("TESSERA_PLUGIN_WARNINGS");  // as the default handler does
    if (print && *print && std::string(print) != "0") std::fprintf(stderr, "[tessera warning] %s\n", text.c_str());
  }
  if (Py_IsInitialized() && PyGILState_Check()) return issue(text, at_load);
  DeferredWarnings& deferred = deferred_warnings();
  if (deferred.collecting) deferred.pending.emplace_back(text, at_load);
  else if (!at_load) std::fprintf(stderr, "[tessera warning] %s\n", text.c_str());
}

}  // namespace

DeferredWarnings& deferred_warnings() {
  thread_local DeferredWarnings deferred;
  return deferred;
}

void issue_deferred_warnings() {
  auto pending = std::move(deferred_warnings().pending);
  deferred_warnings().pending.clear();
  for (const auto& [text, at_load] : pending) issue(text, at_load);
}

void bind_plugins(py::module_& m) {
  set_warning_handler(python_warning_handler);
  m.def("set_cpu_fallback", &tessera::set_cpu_fallback, py::arg("enabled"),
        "Runs operators a device plugin lacks on the CPU with copies (default on; env TESSERA_CPU_FALLBACK=0).");
  m.def("cpu_fallback_enabled", &tessera::cpu_fallback_enabled);
  // The C ABI this host speaks, "major.minor": plugins built against it report the same.
  m.attr("ABI_VERSION") = std::to_string(TESSERA_ABI_MAJOR) + "." + std::to_string(TESSERA_ABI_MINOR);
  m.def(
      "plugins_load",
      [](const std::string& path) {
        PluginInfo info;
        {
          py::gil_scoped_release unlocked;
          info = load_plugin(path);  // a no-op when that file is loaded already
        }
        return info_dict(info);
      },
      py::arg("path"),
      "Loads the plugin at `path` and returns what it registered (name, version, abi, path, devices, kernels, "
      "fallbacks, operators_defined). Raises PluginError naming the reason when the plugin is refused.");
  m.def(
      "plugins_list",
      [] {
        py::list out;
        for (const PluginInfo& p : loaded_plugins()) out.append(info_dict(p));
        return out;
      },
      "The loaded plugins, in load order, as dicts (see plugins_load).");
  m.def(
      "plugins_describe",
      [](const std::string& name) {
        auto& dispatcher = Dispatcher::instance();
        std::vector<OperatorHandle> ops = overloads_of(name);
        if (ops.empty()) return dispatcher.describe_text(name);  // raises: unknown operator
        std::string text;
        for (OperatorHandle op : ops) text += dispatcher.describe_text(op->name());
        return text;
      },
      py::arg("name"),
      "Which kernel each dispatch key has, and from which plugin, for every overload of a base name ('add') "
      "or for one full name ('add.Tensor').");
  m.def("plugins_search_path", &plugin_search_path,
        "Folders searched for plugins: TESSERA_PLUGIN_PATH entries, then lib/tessera/plugins next to libtessera.so.");
  m.def(
      "plugins_load_all",
      [] {
        py::gil_scoped_release unlocked;
        return load_all_plugins();
      },
      "Loads every plugin on the search path; returns the refusals as messages.");
  m.def("plugins_table", &describe_plugins, "A human-readable table of the loaded plugins.");
  m.def(
      "plugins_load_named",
      [](const std::string& name, const std::string& needed_for) {
        py::gil_scoped_release unlocked;
        // A load the user did not ask for (autograd on requires_grad_, the profiler) obeys strict mode.
        if (!needed_for.empty() && !is_plugin_loaded(name)) require_lazy_loading(name, needed_for);
        return load_named_plugin(name);
      },
      py::arg("name"), py::arg("needed_for") = "",
      "Loads libtessera_<name>.so from the search path unless a plugin of that name is loaded; False when it is "
      "not there. With needed_for (what needs it), a PluginError instead while lazy loading is off.");
  m.def("set_lazy_loading", &set_lazy_loading, py::arg("enabled"),
        "Off: only plugins loaded explicitly serve (strict mode); a need for another raises PluginError naming it.");
  m.def("lazy_loading_enabled", &lazy_loading_enabled);
  m.def("observing", [] { return observer() != nullptr; },
        "True while an observer (the profiler) is installed (ABI 1.6).");
  m.def("observe_range", &observe_range, py::arg("phase"), py::arg("name"), py::arg("sequence_nr") = -1,
        "Reports the begin (phase 0) or end (1) of a named range to the observer, if any (record_function).");
}

}  // namespace tessera::python
