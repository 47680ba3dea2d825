import Foundation
package import Logging
import NIOConcurrencyHelpers
import Support

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A swift-log handler writing one line per message to standard output and, optionally, an append-only log file:
/// `2026-11-21T09:40:00.123Z info pushchat-api: Connection OK push.message_id=42`.
package struct LineLogHandler: LogHandler {
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
    let format: LogFormat
    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?

    init(label: String, sink: Sink, level: Logger.Level, format: LogFormat = .text) {
        self.label = label
        self.sink = sink
        self.logLevel = level
        self.format = format
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        sink.write(format == .json ? jsonLine(event) : textLine(event))
    }

    /// One JSON object; metadata keys become fields (the fixed fields win on a clash).
    func jsonLine(_ event: LogEvent) -> String {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let extra = event.metadata { all.merge(extra) { $1 } }
        var line = #"{"time":""# + Self.timestamp() + #"","level":""# + event.level.rawValue + #"","label":"#
        line += JSONText.quoted(label) + #","message":"# + JSONText.quoted(event.message.description)
        for (key, value) in all.sorted(by: { $0.key < $1.key }) where !["time", "level", "label", "message"].contains(key) {
            line += "," + JSONText.quoted(key) + ":" + JSONText.quoted(value.description)
        }
        return line + "}\n"
    }

    func textLine(_ event: LogEvent) -> String {
        var line = Self.timestamp()
        line += " "
        line += event.level.rawValue
        line += " "
        line += label
        line += ": "
        line += event.message.description
        if metadataProvider == nil && (event.metadata?.isEmpty ?? true) {
            append(metadata, to: &line)
        } else {
            var all = metadata
            if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
            if let extra = event.metadata { all.merge(extra) { $1 } }
            append(all, to: &line)
        }
        line += "\n"
        return line
    }

    private func append(_ metadata: Logger.Metadata, to line: inout String) {
        guard !metadata.isEmpty else { return }
        for (key, value) in metadata.count == 1 ? Array(metadata) : metadata.sorted(by: { $0.key < $1.key }) {
            line += " "
            line += key
            line += "="
            line += value.description
        }
    }

    /// ISO 8601 UTC with milliseconds (`2026-11-21T09:40:00.123Z`), written digit by digit: this runs for every
    /// log line, including the access log.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var value = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(Int(parts.tm_year) + 1900, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(Int(parts.tm_mon) + 1, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(Int(parts.tm_mday), 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(Int(parts.tm_hour), 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(Int(parts.tm_min), 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(Int(parts.tm_sec), 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(milliseconds, 3, at: 20)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }
}
