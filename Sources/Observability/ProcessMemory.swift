import CAllocator
import Foundation

/// The memory of this process, as `/metrics` exports it: what the system counts (resident set) and what the C
/// allocator holds (in use by live data, and freed but kept in its heaps). RSS growing while `inUse` stays flat is the
/// allocator keeping memory, not a leak.
package struct ProcessMemory: Sendable, Equatable {
    /// Resident set size in bytes (`/proc/self/statm`; 0 where there is none).
    package var resident: Int
    /// Bytes the allocator has handed out and that are not freed (0 where the allocator has no statistics).
    package var inUse: Int
    /// Bytes freed but kept by the allocator.
    package var retained: Int
    /// Whether `inUse` and `retained` are real figures (glibc).
    package var allocatorStatistics: Bool

    /// The figures now.
    package static func now() -> ProcessMemory {
        let heap = pushchat_heap_statistics_now()
        return ProcessMemory(
            resident: residentBytes(),
            inUse: Int(heap.in_use),
            retained: Int(heap.free),
            allocatorStatistics: heap.available != 0
        )
    }

    private static func residentBytes() -> Int {
        // statm: size resident shared text lib data dt, in pages.
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
