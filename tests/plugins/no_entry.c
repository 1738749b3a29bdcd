/* A shared library that is not a Quilt plugin: it exports a function, but not
 * quilt_backend_init. The host's loader must refuse it with a message, not crash. */
__attribute__((visibility("default"))) int quilt_not_a_backend(void) {
  return 42;
}
