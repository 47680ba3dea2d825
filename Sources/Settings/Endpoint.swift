/// A `host:port` setting (`gateway.push.apple.com:2195`, `127.0.0.1:2195`, `[::1]:2195`).
package struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`; `nil` when malformed.
    package init?(parsing text: String) {
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

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A setting whose value must never be printed (passphrases).
package struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    package let value: String
    package init(_ value: String) { self.value = value }
    package var description: String { "***" }
    package var debugDescription: String { "***" }
}
