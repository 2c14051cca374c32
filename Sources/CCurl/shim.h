// Shim for libcurl (issue 39: network streams through a transport that stops at each
// redirect and counts the response's header bytes).
//
// Why it exists: curl_easy_setopt and curl_easy_getinfo are variadic, which Swift
// cannot call; each typed wrapper below passes one kind of value. Every symbol added
// here is prefixed `ccurl_`.
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *opaque);
typedef int (*ccurl_progress_callback)(void *opaque, curl_off_t dltotal, curl_off_t dlnow,
                                       curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode ccurl_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_offset(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_list(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_data_callback(CURL *h, CURLoption o, ccurl_data_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_set_progress_callback(CURL *h, ccurl_progress_callback v) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v);
}
static inline CURLcode ccurl_get_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_get_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

/// A write callback's answer that holds the transfer until curl_easy_pause(CONT).
static const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static const int ccurl_pause_continue = CURLPAUSE_CONT;
#endif
