import Support

/// What the API shows beyond `/api.php`: the tutorial's helper pages and where its metrics are served.
package struct ExposureSettings: Sendable {
    /// Serve the test forms and `/test/database` (`api_test_pages`). Default: on in development, off in production
    /// (404): on the open internet they are a way to fill rooms and probe the database.
    package var testPages: Bool
    /// `/metrics` of the API listens here, apart from the public port (`api_metrics_host`, `api_metrics_port`).
    /// Default 127.0.0.1:44449; port 0: any free port.
    package var metricsHost = "127.0.0.1"
    package var metricsPort = 44449
    /// The API speaks TLS itself with this certificate chain and key (`api_tls_certificate`, `api_tls_key`, PEM).
    /// The udid and the room code are credentials: plain HTTP is for development, or behind a proxy that ends TLS.
    package var tlsCertificate: String?
    package var tlsKey: String?

    package init(mode: Mode) {
        testPages = mode == .development
    }

    init(source: ConfigurationSource) throws(ConfigurationError) {
        self.init(mode: source.mode)
        if let text = source.value(.apiTestPages) {
            guard let value = Self.bool(text) else {
                throw Configuration.invalid(.apiTestPages, source, "expected true or false, got '\(text)'")
            }
            testPages = value
        }
        tlsCertificate = source.value(.apiTLSCertificate).flatMap { $0.isEmpty ? nil : $0 }
        tlsKey = source.value(.apiTLSKey).flatMap { $0.isEmpty ? nil : $0 }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            let missing: ConfigurationKey = tlsCertificate == nil ? .apiTLSCertificate : .apiTLSKey
            throw ConfigurationError(
                code: .missingValue,
                key: missing.environmentName,
                reason: "not set: TLS needs both api_tls_certificate and api_tls_key"
            )
        }
        if let host = source.value(.apiMetricsHost) {
            guard !host.isEmpty, !host.contains(where: \.isWhitespace) else {
                throw Configuration.invalid(.apiMetricsHost, source, "expected a host name or IP address")
            }
            metricsHost = host
        }
        if let text = source.value(.apiMetricsPort) {
            guard let port = Int(text), (0...65535).contains(port) else {
                throw Configuration.invalid(.apiMetricsPort, source, "expected a port number from 0 to 65535, got '\(text)'")
            }
            metricsPort = port
        }
    }

    /// `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`.
    static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0": false
        default: nil
        }
    }
}
