/* Host copies with non-temporal (streaming) stores, for packing pageable arrays into pinned
 * staging buffers (sparsegpu/transfer.py).
 *
 * Why: a plain memcpy into a buffer that is not in cache first reads every destination line
 * (read for ownership), then writes it back: three bytes of memory traffic per byte copied.
 * Streaming stores write whole lines without reading them: two. glibc switches to them only
 * above x86_non_temporal_threshold, which scales with the last-level cache (about 225 MB on
 * the 300 MiB-L3 host of the H200), far above the pieces a packing thread copies. On that
 * host, 16 threads packed 1 GiB at 36-42 GB/s with memcpy and 60-62 GB/s with streaming
 * stores, and a pageable 2.48 GB CSR upload went from 26 to 36 GB/s.
 *
 * copy(destination, source) releases the GIL, so a thread pool copies in parallel. Other
 * architectures than x86-64 get memcpy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define SPARSEGPU_STREAMING 1
#else
#define SPARSEGPU_STREAMING 0
#endif

static void streaming_copy(char *dst, const char *src, size_t n) {
#if SPARSEGPU_STREAMING
    /* Head up to the destination's 16-byte boundary, then 64 bytes (one line) per step. */
    size_t head = (size_t)((16 - ((uintptr_t)dst & 15)) & 15);
    if (head > n) head = n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    size_t lines = n / 64;
    for (size_t i = 0; i < lines; ++i, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n % 64);
    /* Streaming stores are weakly ordered: fence before the caller hands the buffer to the DMA. */
    _mm_sfence();
#else
    memcpy(dst, src, n);
#endif
}

static PyObject *copy(PyObject *self, PyObject *args) {
    Py_buffer dst, src;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*:copy", &dst, &src)) return NULL;
    if (!PyBuffer_IsContiguous(&dst, 'C') || !PyBuffer_IsContiguous(&src, 'C')) {
        PyBuffer_Release(&dst);
        PyBuffer_Release(&src);
        PyErr_SetString(PyExc_ValueError, "copy: both buffers must be C-contiguous");
        return NULL;
    }
    if (dst.len != src.len) {
        PyErr_Format(PyExc_ValueError, "copy: destination has %zd bytes, source %zd", dst.len, src.len);
        PyBuffer_Release(&dst);
        PyBuffer_Release(&src);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    streaming_copy((char *)dst.buf, (const char *)src.buf, (size_t)src.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"copy", copy, METH_VARARGS,
     "copy(destination, source): copy the bytes of a C-contiguous buffer into another of the same "
     "size with non-temporal stores (memcpy on other architectures than x86-64); releases the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_streamcopy",
                                    "Host copies with non-temporal stores (see the C source).", -1, methods};

PyMODINIT_FUNC PyInit__streamcopy(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "STREAMING", SPARSEGPU_STREAMING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
