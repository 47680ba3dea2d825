import Foundation
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A swift-log handler writing one line per message to standard output and, optionally, an append-only log file:
/// `2026-11-21T09:40:00.123Z info pushchat-api: Connection OK push.message_id=42`.
public struct LineLogHandler: LogHandler {
    /// The output shared by every logger of the process.
    final class Sink: Sendable {
        let descriptors: [Int32]

        init(descriptors: [Int32]) { self.descriptors = descriptors }

        func write(_ line: String) {
            var line = line
            line.withUTF8 { buffer in
                for descriptor in descriptors {
                    var offset = 0
                    while offset < buffer.count {
                        let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
        }
    }

    let label: String
    let sink: Sink
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    init(label: String, sink: Sink, level: Logger.Level) {
        self.label = label
        self.sink = sink
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let extra = event.metadata { all.merge(extra) { $1 } }
        var line = Self.timestamp() + " " + event.level.rawValue + " " + label + ": " + event.message.description
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(value)"
        }
        sink.write(line + "\n")
    }

    /// ISO 8601 UTC with milliseconds, without Foundation's formatter cost.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}
