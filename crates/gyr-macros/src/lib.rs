#![doc = include_str!("../README.md")]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Expr, Fields, LitStr, Path, parse_macro_input};

/// Implements `gyr::Sensor` for a struct with named fields, and adds an inherent `emit()`.
#[proc_macro_derive(Sensor, attributes(sensor))]
pub fn derive_sensor(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Makes a function a span: `gyr.span.begin` when it is called, `gyr.span.end` when it returns
/// or unwinds, named after the function unless `#[instrument(name = "...")]` says otherwise.
#[proc_macro_attribute]
pub fn instrument(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func = parse_macro_input!(item as syn::ItemFn);
    let mut name = func.sig.ident.to_string();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            let lit: LitStr = meta.value()?.parse()?;
            name = lit.value();
            Ok(())
        } else {
            Err(meta.error("unknown instrument argument; the one supported is `name = \"...\"`"))
        }
    });
    parse_macro_input!(attr with parser);
    if let Some(a) = &func.sig.asyncness {
        return syn::Error::new_spanned(
            a,
            "a span is scoped to one thread, and an async fn can move between threads at each \
             await: open `gyr::span!` around code without awaits instead",
        )
        .to_compile_error()
        .into();
    }
    let block = &func.block;
    *func.block = syn::parse_quote!({
        let __gyr_span = ::gyr::span::Span::enter(#name);
        #block
    });
    quote!(#func).into()
}

fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    let mut name = snake_case(&ident.to_string());
    for attr in &input.attrs {
        if attr.path().is_ident("sensor") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    let lit: LitStr = meta.value()?.parse()?;
                    name = lit.value();
                    Ok(())
                } else {
                    Err(meta
                        .error("unknown sensor attribute; the one supported is `name = \"...\"`"))
                }
            })?;
        }
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(_) => {
                return Err(syn::Error::new_spanned(
                    ident,
                    "Sensor needs named fields: they name the event's fields",
                ));
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                ident,
                "Sensor can be derived for structs only",
            ));
        }
    };
    let names: Vec<_> = fields.iter().map(|f| f.ident.clone().unwrap()).collect();
    let name_strs: Vec<_> = names
        .iter()
        .map(|n| n.to_string().trim_start_matches("r#").to_owned())
        .collect();
    let types: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::gyr::Sensor for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
            fn fields() -> ::std::vec::Vec<::gyr::__private::Field> {
                ::std::vec![#(::gyr::__private::Field::new(#name_strs, <#types as ::gyr::SensorField>::TYPE)),*]
            }
            #[inline(always)]
            fn sensor_type() -> &'static ::gyr::__private::SensorType {
                static TYPE: ::gyr::__private::SensorType = ::gyr::__private::SensorType::new();
                &TYPE
            }
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                0 #(+ ::gyr::SensorField::encoded_len(&self.#names))*
            }
            #[inline(always)]
            #[allow(unused_variables, unused_mut)]
            fn encode(&self, out: &mut [u8]) {
                let mut at = 0usize;
                #(at += ::gyr::SensorField::encode(&self.#names, &mut out[at..]);)*
            }
        }
        impl #impl_generics #ident #ty_generics #where_clause {
            /// Records this event, if its sensor is on.
            #[inline(always)]
            #[allow(dead_code)]
            pub fn emit(&self) {
                ::gyr::emit(self)
            }
        }
    })
}

/// Implements `gyr::steer::Steerable` for a struct with named fields.
///
/// Field attributes, inside `#[steer(...)]`: `unit = "s"`, `min = 0.0`, `max = 1.0`,
/// `read_only`, `description = "..."`, `validate = path::to::fn` (a `fn(&FieldType) ->
/// Result<(), String>` that sees the new value), `nested` (the field is itself `Steerable`; its
/// attributes appear as `field.attr`), `skip` (not an attribute).
#[proc_macro_derive(Steerable, attributes(steer))]
pub fn derive_steerable(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_steerable(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[derive(Default)]
struct SteerAttrs {
    unit: Option<String>,
    min: Option<Expr>,
    max: Option<Expr>,
    read_only: bool,
    description: Option<String>,
    validate: Option<Path>,
    nested: bool,
    skip: bool,
}

fn steer_attrs(field: &syn::Field) -> syn::Result<SteerAttrs> {
    let mut out = SteerAttrs::default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("steer")) {
        attr.parse_nested_meta(|meta| {
            let p = &meta.path;
            if p.is_ident("unit") {
                out.unit = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if p.is_ident("description") {
                out.description = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if p.is_ident("min") {
                out.min = Some(meta.value()?.parse::<Expr>()?);
            } else if p.is_ident("max") {
                out.max = Some(meta.value()?.parse::<Expr>()?);
            } else if p.is_ident("validate") {
                out.validate = Some(meta.value()?.parse::<Path>()?);
            } else if p.is_ident("read_only") {
                out.read_only = true;
            } else if p.is_ident("nested") {
                out.nested = true;
            } else if p.is_ident("skip") {
                out.skip = true;
            } else {
                return Err(meta.error(
                    "unknown steer attribute; use unit, min, max, read_only, description, validate, nested or skip",
                ));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

fn expand_steerable(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            _ => {
                return Err(syn::Error::new_spanned(
                    ident,
                    "Steerable needs named fields: they name the attributes",
                ));
            }
        },
        _ => {
            return Err(syn::Error::new_spanned(
                ident,
                "Steerable can be derived for structs only",
            ));
        }
    };
    let mut infos = Vec::new();
    let mut gets = Vec::new();
    let mut sets = Vec::new();
    let mut nested_gets = Vec::new();
    let mut nested_sets = Vec::new();
    for f in fields {
        let a = steer_attrs(f)?;
        if a.skip {
            continue;
        }
        let fid = f.ident.clone().unwrap();
        let name = fid.to_string().trim_start_matches("r#").to_owned();
        let ty = &f.ty;
        if a.nested {
            let prefix = format!("{name}.");
            infos.push(quote! {
                for mut a in <#ty as ::gyr::steer::Steerable>::attributes() {
                    a.name = ::std::format!("{}{}", #prefix, a.name);
                    v.push(a);
                }
            });
            nested_gets.push(quote! {
                if let ::std::option::Option::Some(rest) = name.strip_prefix(#prefix) {
                    return ::gyr::steer::Steerable::get_attr(&self.#fid, rest);
                }
            });
            nested_sets.push(quote! {
                if let ::std::option::Option::Some(rest) = name.strip_prefix(#prefix) {
                    return ::gyr::steer::Steerable::set_attr(&mut self.#fid, rest, value);
                }
            });
            continue;
        }
        let unit = a
            .unit
            .iter()
            .map(|u| quote! { a.unit = ::std::option::Option::Some(#u.into()); });
        let desc = a
            .description
            .iter()
            .map(|d| quote! { a.description = ::std::option::Option::Some(#d.into()); });
        let min = a
            .min
            .iter()
            .map(|m| quote! { a.min = ::std::option::Option::Some((#m) as f64); });
        let max = a
            .max
            .iter()
            .map(|m| quote! { a.max = ::std::option::Option::Some((#m) as f64); });
        let ro = a.read_only;
        infos.push(quote! {
            {
                let mut a = ::gyr::steer::AttrInfo::new(#name, <#ty as ::gyr::steer::AttrValue>::TYPE);
                a.read_only = #ro;
                #(#unit)* #(#desc)* #(#min)* #(#max)*
                v.push(a);
            }
        });
        gets.push(quote! { #name => ::std::option::Option::Some(::gyr::steer::AttrValue::to_value(&self.#fid)), });
        let validate = a.validate.iter().map(|p| quote! { #p(&new)?; });
        if ro {
            sets.push(quote! { #name => ::std::result::Result::Err(::std::format!("`{}` is read-only", #name)), });
        } else {
            sets.push(quote! {
                #name => {
                    let new = <#ty as ::gyr::steer::AttrValue>::from_value(value)?;
                    #(#validate)*
                    self.#fid = new;
                    ::std::result::Result::Ok(())
                }
            });
        }
    }
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::gyr::steer::Steerable for #ident #ty_generics #where_clause {
            fn attributes() -> ::std::vec::Vec<::gyr::steer::AttrInfo> {
                let mut v = ::std::vec::Vec::new();
                #(#infos)*
                v
            }
            #[allow(unreachable_code)]
            fn get_attr(&self, name: &str) -> ::std::option::Option<::gyr::gyr_core::Value> {
                match name {
                    #(#gets)*
                    _ => {
                        #(#nested_gets)*
                        ::std::option::Option::None
                    }
                }
            }
            #[allow(unreachable_code)]
            fn set_attr(&mut self, name: &str, value: &::gyr::gyr_core::Value) -> ::std::result::Result<(), ::std::string::String> {
                match name {
                    #(#sets)*
                    _ => {
                        #(#nested_sets)*
                        ::std::result::Result::Err(::std::format!("no attribute `{}`", name))
                    }
                }
            }
        }
    })
}
