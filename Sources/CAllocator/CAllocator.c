#include "CAllocator.h"

#include <stdlib.h> /* defines __GLIBC__ where the C library is glibc */

#if defined(__GLIBC__)
#include <malloc.h>
#endif

pushchat_heap_statistics pushchat_heap_statistics_now(void) {
    pushchat_heap_statistics statistics = {0, 0, 0};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    statistics.in_use = info.uordblks + info.hblkhd;
    statistics.free = info.fordblks;
    statistics.available = 1;
#endif
    return statistics;
}
