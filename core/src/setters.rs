//! [`setters!`](crate::setters): a builder's plain setters, one line each.

/// Writes builder setters that store their argument.
///
/// `name(arg: Type) => s.field;` becomes
/// `pub fn name(mut self, arg: Type) -> Self { self.s.field = arg; self }`, keeping the doc
/// comments and attributes written above it; `=> s.field = expr;` stores an expression of the
/// argument instead (`Some(arg)`, `arg.into()`).
///
/// ```
/// #[derive(Default)]
/// pub struct Builder { s: Settings }
/// #[derive(Default)]
/// struct Settings { size: usize, name: Option<String> }
///
/// impl Builder {
///     rivus_sdk::setters! {
///         /// Records per batch.
///         size(n: usize) => s.size;
///         /// The job's name.
///         name(name: impl Into<String>) => s.name = Some(name.into());
///     }
/// }
///
/// let b = Builder::default().size(3).name("orders");
/// assert_eq!((b.s.size, b.s.name.as_deref()), (3, Some("orders")));
/// ```
#[macro_export]
macro_rules! setters {
    ($( $(#[$attr:meta])* $name:ident($arg:ident: $ty:ty) => $($field:ident).+ $(= $value:expr)?; )*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = $crate::setters!(@value $arg $(, $value)?);
                self
            }
        )*
    };
    (@value $arg:ident) => { $arg };
    (@value $arg:ident, $value:expr) => { $value };
}
