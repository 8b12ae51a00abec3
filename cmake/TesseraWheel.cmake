# What `pip install .` puts in the wheel, built from the same tree as `cmake --build --preset
# release` (pyproject.toml: build-dir = build/release, build.targets, install.components), so pip
# compiles nothing that the CMake build already compiled.
#   tessera_wheel      every plugin this tree builds (CPU, autograd, CUDA, ROCm when enabled): pip's default
#   tessera_wheel_cpu  the host and the plugins that need no GPU toolkit: what scripts/demo.sh builds
# Install component "python" (wheel.install-dir = tessera): _C and _generated_ops.py at the package
# root, libtessera.so in lib/, plugins in lib/tessera/plugins/ (where libtessera looks for them).
# Plugins are installed OPTIONAL: a wheel built from tessera_wheel_cpu carries no GPU plugin.
set(_gpu_plugins tessera_cuda tessera_hip)
add_custom_target(tessera_wheel_cpu)
add_dependencies(tessera_wheel_cpu tessera tessera_python tessera_python_package)
add_custom_target(tessera_wheel)
add_dependencies(tessera_wheel tessera_wheel_cpu)

install(TARGETS tessera LIBRARY DESTINATION lib COMPONENT python EXCLUDE_FROM_ALL)
get_property(_plugins GLOBAL PROPERTY TESSERA_INSTALLED_PLUGINS)
foreach(plugin IN LISTS _plugins)
  if(plugin IN_LIST _gpu_plugins)
    add_dependencies(tessera_wheel ${plugin})
  else()
    add_dependencies(tessera_wheel_cpu ${plugin})
  endif()
  install(TARGETS ${plugin} LIBRARY DESTINATION lib/tessera/plugins COMPONENT python EXCLUDE_FROM_ALL OPTIONAL)
endforeach()

# The export runtime and its command-line runner (the console script tessera-export-run runs it):
# tessera/bin/tessera-export-run finds its libraries in tessera/lib through $ORIGIN/../lib.
add_dependencies(tessera_wheel_cpu tessera_export_run)
install(TARGETS tessera_cpp tessera_export tessera_distributed LIBRARY DESTINATION lib COMPONENT python EXCLUDE_FROM_ALL)
install(TARGETS tessera_export_run RUNTIME DESTINATION bin COMPONENT python EXCLUDE_FROM_ALL)
