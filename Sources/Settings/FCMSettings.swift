package import Support

/// Where and how the push daemon reaches Firebase Cloud Messaging (or the simulator's Google side), for the default
/// app's Android devices; other apps name their service account in `apps`.
package struct FCMSettings: Sendable {
    /// The Firebase service-account JSON file (`fcm_service_account_file`); without it the default app sends nothing to
    /// Android devices (their rows wait).
    package var serviceAccountFile: String?
    /// FCM's HTTP v1 API (`fcm_host`). Default `fcm.googleapis.com:443`.
    package var host = Endpoint(host: "fcm.googleapis.com", port: 443)
    /// Extra trusted roots (PEM) for FCM and the token URI, so the daemon trusts the simulator (`fcm_ca_file`).
    package var caFile: String?

    package init() {}

    /// Reads the `fcm_*` settings.
    init(source: ConfigurationSource) throws(ConfigurationError) {
        func nonEmpty(_ key: ConfigurationKey) -> String? { source.value(key).flatMap { $0.isEmpty ? nil : $0 } }
        serviceAccountFile = nonEmpty(.fcmServiceAccountFile)
        if let file = serviceAccountFile, !file.hasPrefix("/") {
            throw ConfigurationError(
                code: .invalidValue,
                key: source.origin(of: .fcmServiceAccountFile),
                reason: "expected an absolute path, got '\(file)'"
            )
        }
        if let text = nonEmpty(.fcmHost) {
            guard let endpoint = Endpoint(parsing: text) else {
                throw ConfigurationError(code: .invalidValue, key: source.origin(of: .fcmHost), reason: "expected host:port, got '\(text)'")
            }
            host = endpoint
        }
        caFile = nonEmpty(.fcmCAFile)
    }
}
