/// Ids of the project's private ATS notes: `§3.2`, `doc A16`, `X2`, `open question 7`, `(ref …)`, and its cipher-list
/// columns `Doc-2015`, `Src-2020/22` and `Src-now`. Texts users read (answers, headers, notices, `explain`,
/// `diagnose`, `lint`) must not quote them: users do not have the notes.
public enum PrivateReferenceIDs {
    /// Every id in `text`, in order; empty when it quotes none.
    public static func found(in text: String) -> [String] {
        text.matches(of: #/§|\b[AFIPSX][0-9]{1,2}\b|open question|\(ref\b|Doc-2015|Src-/#).map { String($0.output) }
    }
}
