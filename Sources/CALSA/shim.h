// Shim for alsa-lib pieces that do not import into Swift.
//
// Why it exists: snd_lib_error_set_handler() takes a variadic C function, which Swift
// cannot write, and alsa-lib would otherwise print its own diagnostics to stderr
// while playd walks a device fallback chain. Every symbol added here is prefixed
// `calsa_`. snd_pcm_hw_params_alloca() is not wrapped: Swift code uses
// snd_pcm_hw_params_malloc()/free() instead.
#ifndef CALSA_SHIM_H
#define CALSA_SHIM_H

#include <alsa/asoundlib.h>

static void calsa_silent_error_handler(const char *file, int line, const char *function,
                                       int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

/// Route alsa-lib's library diagnostics to nowhere; playd reports failures itself
/// with the name of the call that failed.
static inline void calsa_silence_library_errors(void) {
    snd_lib_error_set_handler(calsa_silent_error_handler);
}

#endif
