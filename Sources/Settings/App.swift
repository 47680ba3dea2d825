package import Foundation

/// One app the server sends for: a bundle id in one APNs environment, with its own credentials and transport
/// (`apps` table, `pushchat-api apps`). The app named ``defaultName`` may leave every setting to the daemon's
/// configuration (``usesConfiguration``): that is how an installation from before apps keeps working unchanged.
package struct App: Sendable, Equatable {
    /// Apple's two environments: the development (sandbox) host and the production host.
    package enum Environment: String, Sendable, CaseIterable {
        case sandbox
        case production
    }

    /// How the app authenticates to APNs: the paths of its files (the database never holds a key).
    package enum Credentials: Sendable, Equatable {
        /// Token authentication (HTTP/2 only): the `.p8` signing key, its key id, the team id.
        case token(keyFile: String, keyID: String, teamID: String)
        /// A client certificate and key (PEM or `.p12`), and the file holding its passphrase if it has one.
        case certificate(path: String, passphraseFile: String?)
    }

    /// The settings an app says for itself (nil for the default app as migrated: all from the configuration).
    package struct Settings: Sendable, Equatable {
        package var bundleID: String
        package var environment: Environment
        package var transport: APNsTransport
        package var credentials: Credentials
        /// The Firebase service-account file for the app's Android devices (nil: none; their rows wait).
        package var fcmServiceAccountFile: String?
        /// The VAPID key file for the app's browsers (nil: none; their rows wait).
        package var webPushVAPIDKeyFile: String?
        /// The app's VAPID subject (nil: `webpush_subject`).
        package var webPushSubject: String?
        /// The public half of ``webPushVAPIDKeyFile``'s key (what the API serves the app's pages; set with it).
        package var webPushPublicKey: String?

        package init(
            bundleID: String,
            environment: Environment,
            transport: APNsTransport,
            credentials: Credentials,
            fcmServiceAccountFile: String? = nil,
            webPushVAPIDKeyFile: String? = nil,
            webPushSubject: String? = nil,
            webPushPublicKey: String? = nil
        ) {
            self.bundleID = bundleID
            self.environment = environment
            self.transport = transport
            self.credentials = credentials
            self.fcmServiceAccountFile = fcmServiceAccountFile
            self.webPushVAPIDKeyFile = webPushVAPIDKeyFile
            self.webPushSubject = webPushSubject
            self.webPushPublicKey = webPushPublicKey
        }
    }

    /// The app every row from before apps belongs to, and the chat API's unless `chat_app` names another.
    package static let defaultName = "default"

    package let name: String
    package var settings: Settings?
    package var createdAt: Date
    package var updatedAt: Date
    package var disabledAt: Date?

    package init(name: String, settings: Settings?, createdAt: Date = Date(), updatedAt: Date = Date(), disabledAt: Date? = nil) {
        self.name = name
        self.settings = settings
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.disabledAt = disabledAt
    }

    /// Every setting comes from the daemon's configuration (`PUSHCHAT_APNS_*`).
    package var usesConfiguration: Bool { settings == nil }

    // MARK: Checks (the `apps` table's constraints say the same; these give the reason)

    /// 1 to 64 lower-case letters, digits, '.', '-', '_', starting with a letter or digit.
    package static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (1...64).contains(name.utf8.count) else { return false }
        func allowed(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) }
        return allowed(first) && name.utf8.allSatisfy { allowed($0) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
    }

    /// Reverse-DNS: at least two parts of letters, digits and '-', separated by '.'; at most 155 bytes (Apple's topic
    /// suffixes make it longer).
    package static func isValidBundleID(_ id: String) -> Bool {
        let parts = id.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, id.utf8.count <= 155 else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == 0x2D }
        }
    }

    /// Apple's 10-character key and team ids: upper-case letters and digits.
    package static func isValidAppleID(_ id: String) -> Bool {
        id.utf8.count == 10 && id.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) }
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || (0x30...0x39).contains(self)
    }
}

extension App.Settings {
    /// Why these settings cannot work, or nil: the binary interface takes only a certificate, paths are absolute, ids
    /// are Apple's format.
    package var problem: String? {
        guard App.isValidBundleID(bundleID) else {
            return "bundle id '\(bundleID)' is not reverse-DNS (letters, digits and '-' in two or more parts separated by '.')"
        }
        switch credentials {
        case .token(let keyFile, let keyID, let teamID):
            if transport == .binary {
                return "the binary interface authenticates with a certificate only; use --transport http2 or --certificate"
            }
            if !keyFile.hasPrefix("/") { return "--key-file must be an absolute path (the push daemon reads it), got '\(keyFile)'" }
            if !App.isValidAppleID(keyID) { return "--key-id must be Apple's 10 upper-case letters and digits, got '\(keyID)'" }
            if !App.isValidAppleID(teamID) { return "--team-id must be Apple's 10 upper-case letters and digits, got '\(teamID)'" }
        case .certificate(let path, let passphraseFile):
            if !path.hasPrefix("/") { return "--certificate must be an absolute path (the push daemon reads it), got '\(path)'" }
            if let passphraseFile, !passphraseFile.hasPrefix("/") {
                return "--passphrase-file must be an absolute path (the push daemon reads it), got '\(passphraseFile)'"
            }
        }
        if let file = fcmServiceAccountFile, !file.hasPrefix("/") {
            return "--fcm-service-account must be an absolute path (the push daemon reads it), got '\(file)'"
        }
        if let file = webPushVAPIDKeyFile, !file.hasPrefix("/") {
            return "--vapid-key-file must be an absolute path (the push daemon reads it), got '\(file)'"
        }
        if let subject = webPushSubject {
            let lower = subject.lowercased()
            guard (lower.hasPrefix("mailto:") && subject.contains("@")) || (lower.hasPrefix("https://") && subject.count > 8) else {
                return "--vapid-subject must be mailto:ADDRESS or an https: URL, got '\(subject)'"
            }
        }
        return nil
    }
}

extension APNsSettings {
    /// These settings as `app` says them: its bundle id as the topic, its transport and credentials, and its
    /// environment's hosts unless the configuration names them for every app (``namedEndpoints``); the trusted roots
    /// stay the configuration's. The passphrase is read from its file here (the push daemon's user must read it).
    /// Throws the reason the app cannot be used.
    package func forApp(_ settings: App.Settings) throws -> APNsSettings {
        var apns = self
        let environment = APNsSettings(mode: settings.environment == .sandbox ? .development : .production)
        if !namedEndpoints.contains(.apnsGateway) { apns.gateway = environment.gateway }
        if !namedEndpoints.contains(.apnsFeedback) { apns.feedback = environment.feedback }
        if !namedEndpoints.contains(.apnsHost) { apns.host = environment.host }
        apns.namedEndpoints = namedEndpoints
        apns.topic = settings.bundleID
        apns.transport = settings.transport
        switch settings.credentials {
        case .token(let keyFile, let keyID, let teamID):
            (apns.keyFile, apns.keyID, apns.teamID) = (keyFile, keyID, teamID)
            (apns.certificate, apns.passphrase) = (nil, nil)
        case .certificate(let path, let passphraseFile):
            (apns.keyFile, apns.keyID, apns.teamID) = (nil, nil, nil)
            apns.certificate = path
            apns.passphrase = try passphraseFile.map { file in
                do {
                    let text = try String(contentsOfFile: file, encoding: .utf8)
                    return Secret(String(text.trimmingSuffix(while: \.isNewline)))
                } catch {
                    throw AppUnusable(reason: "cannot read the passphrase file \(file): \((error as NSError).localizedDescription)")
                }
            }
        }
        return apns
    }
}

/// An app whose settings the push daemon cannot use (a file it cannot read, a key that does not load).
package struct AppUnusable: Error, CustomStringConvertible {
    package let reason: String
    package init(reason: String) { self.reason = reason }
    package var description: String { reason }
}

extension StringProtocol {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> SubSequence {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
