/* A shared library that is not a Tessera plugin: it exports no tessera_plugin_init. */
int some_unrelated_function(void) { return 42; }
