import NIOSSL

/// Where and how the push daemon and the feedback job reach APNs (or the local simulator).
public struct APNsSettings: Sendable {
    /// The binary gateway. Default: Apple's sandbox in development, production otherwise.
    public var gateway: Endpoint
    /// The binary feedback service. Default: Apple's sandbox in development, production otherwise.
    public var feedback: Endpoint
    /// The provider identity: PEM with certificate and key (the tutorial's `ck.pem`) or `.p12`.
    public var certificate: String?
    /// The passphrase of the identity's key, if it is encrypted.
    public var passphrase: Secret?
    /// Extra trusted roots (PEM), so the daemons trust the simulator; Apple's roots otherwise.
    public var caFile: String?

    public init(mode: Mode) {
        switch mode {
        case .development:
            gateway = Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195)
            feedback = Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)
        case .production:
            gateway = Endpoint(host: "gateway.push.apple.com", port: 2195)
            feedback = Endpoint(host: "feedback.push.apple.com", port: 2196)
        }
    }

    /// Reads the `apns_*` settings.
    init(source: ConfigurationSource) throws(ConfigurationError) {
        self.init(mode: source.mode)
        if let text = source.value(.apnsGateway) {
            guard let endpoint = Endpoint(parsing: text) else { throw Self.invalidEndpoint(.apnsGateway, source, text) }
            gateway = endpoint
        }
        if let text = source.value(.apnsFeedback) {
            guard let endpoint = Endpoint(parsing: text) else { throw Self.invalidEndpoint(.apnsFeedback, source, text) }
            feedback = endpoint
        }
        certificate = source.value(.apnsCertificate).flatMap { $0.isEmpty ? nil : $0 }
        passphrase = source.value(.apnsPassphrase).map(Secret.init)
        caFile = source.value(.apnsCAFile).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The certificate path, or an error naming the key when none is configured.
    public func requireCertificate() throws(ConfigurationError) -> String {
        guard let certificate else {
            throw ConfigurationError(
                code: .missingValue,
                key: ConfigurationKey.apnsCertificate.environmentName,
                reason: "not set: the provider certificate (PEM with certificate and key, or .p12) is needed to reach APNs"
            )
        }
        return certificate
    }

    /// Loads the client identity.
    public func loadIdentity() throws -> ClientIdentity {
        try ClientIdentity.load(path: requireCertificate(), passphrase: passphrase?.value)
    }

    /// The TLS context for APNs connections, built once per process: the identity, trusting `caFile` too.
    public func clientTLSContext() throws -> NIOSSLContext {
        try GatewayTLS.clientContext(identity: loadIdentity(), caFile: caFile)
    }

    private static func invalidEndpoint(_ key: ConfigurationKey, _ source: ConfigurationSource, _ text: String) -> ConfigurationError {
        ConfigurationError(code: .invalidValue, key: source.origin(of: key), reason: "expected host:port, got '\(text)'")
    }
}
