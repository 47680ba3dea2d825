import Foundation
import Testing

@testable import Observability

@Suite struct ProcessMemoryTests {
    /// 128 MB allocated and touched show in what the allocator holds in use and in the resident set, and are gone from
    /// the in-use figure once freed. (Margins of 32 MB: other tests allocate and free at the same time.)
    @Test func allocationsShowInUseAndResident() throws {
        let before = ProcessMemory.now()
        #if os(Linux)
        #expect(before.allocatorStatistics)
        #expect(before.resident > 0)
        #endif
        try #require(before.allocatorStatistics)
        let size = 128 << 20
        let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        block.initializeMemory(as: UInt8.self, repeating: 1, count: size)
        let during = ProcessMemory.now()
        block.deallocate()
        let after = ProcessMemory.now()
        #expect(during.inUse - before.inUse > size - (32 << 20))
        #expect(during.resident - before.resident > size - (32 << 20))
        #expect(during.inUse - after.inUse > size - (32 << 20))
    }

    @Test func metricsExportTheMemory() throws {
        let text = String(decoding: MetricsRegistry().exposition(), as: UTF8.self)
        let resident = try #require(Self.value("process_resident_memory_bytes", in: text))
        #expect(resident > Double(1 << 20))
        #if os(Linux)
        let inUse = try #require(Self.value("pushchat_heap_in_use_bytes", in: text))
        #expect(inUse > Double(1 << 20))
        #expect(Self.value("pushchat_heap_retained_bytes", in: text) != nil)
        #endif
    }

    static func value(_ name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }
}
