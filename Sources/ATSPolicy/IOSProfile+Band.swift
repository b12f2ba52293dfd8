extension IOSProfile {
    /// The behaviour band an iOS version falls in: the newest profile not after it (`--ios 16` → iOS 14's band).
    /// nil before iOS 9, which has no ATS.
    public static func band(for version: Int) -> IOSProfile? {
        allCases.last { $0.rawValue <= version }
    }
}
