import ArgumentParser
package import Support

/// The mode a PushChat process runs in, as the tutorial has it: `development` talks to Apple's sandbox and shows
/// error details; `production` talks to the production gateway and keeps details out of responses.
package enum Mode: String, Sendable, CaseIterable, ExpressibleByArgument {
    case development
    case production

    /// The mode to run in: the positional argument if given, else `APPLICATION_ENV`, else production.
    package static func resolve(argument: Mode?, environment: [String: String]) throws(ConfigurationError) -> Mode {
        if let argument { return argument }
        guard let raw = environment["APPLICATION_ENV"], !raw.isEmpty else { return .production }
        guard let mode = Mode(rawValue: raw.lowercased()) else {
            throw ConfigurationError(
                code: .invalidValue,
                key: "APPLICATION_ENV",
                reason: "expected 'development' or 'production', got '\(raw)'"
            )
        }
        return mode
    }
}
