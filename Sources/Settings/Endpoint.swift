import Observability
import Support

/// A `host:port` setting (`gateway.push.apple.com:2195`, `127.0.0.1:2195`, `[::1]:2195`).
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`; `nil` when malformed.
    public init?(parsing text: String) {
        var host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        }
        host = host.drop { $0 == " " }
        guard !host.isEmpty, !host.contains(where: \.isWhitespace), let port = Int(portText), (1...65535).contains(port) else { return nil }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A setting whose value must never be printed (passphrases).
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "***" }
    public var debugDescription: String { "***" }
}
